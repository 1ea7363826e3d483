"""The public-series study: TCPDBench's F1 (margin 5), its zero baseline, and the scan run on a labelled series."""

from __future__ import annotations

import json

import pytest

from studies.public_series import (AS_PUBLISHED, COUNTED, FALLS, RISES, UNIT_RANGE, Labelled, StudyError,
                                   change_points, f1, load, main, positive, scan, score, true_positives)
from flybench.regress.config import RegressConfig


def test_a_prediction_matches_one_true_point_within_the_margin():
    # TCPDBench's own examples: 23 finds 20 already taken by 20, so it is not matched
    assert true_positives({1, 10, 20, 23}, {3, 8, 20}) == {1, 10, 20}
    assert true_positives({1, 10, 20, 23}, {1, 3, 5, 8, 20}) == {1, 10, 20}
    assert true_positives(set(), {1, 2, 3}) == set()
    assert true_positives({1, 2, 3}, set()) == set()
    # the margin is 5, inclusive
    assert true_positives({10}, {15}) == {10}
    assert true_positives({10}, {16}) == set()


def test_f1_as_tcpdbench_defines_it():
    # annotators agree with [10, 20] within 5 (annotator 4's 5 is 5 from 10): precision 3/3, every recall 1
    assert f1({"1": [10, 20], "2": [11, 20], "3": [10], "4": [0, 5]}, [10, 20]) == pytest.approx(1.0)
    # X = {0, 10}: both match (P = 1); recalls 1/1, 2/2, 1/2 -> R = 5/6; F = 2PR/(P+R) = 10/11
    assert f1({"1": [], "2": [10], "3": [50]}, [10]) == pytest.approx(10 / 11)
    # a false alarm: X = {0, 48, 90} against {0, 50, 52, 120}: 0 and 48 match (P = 2/3);
    # annotator a {0, 50} 2/2, annotator b {0, 52, 120} 2/3 (52 finds 48 4 away) -> R = 5/6; F = 20/27
    assert f1({"a": [50], "b": [52, 120]}, [48, 90]) == pytest.approx(20 / 27)


def test_the_zero_baseline_predicts_only_index_zero():
    # X = {0}: precision 1; recall per annotator is 1 / (its points + 1)
    assert f1({"1": [], "2": [10], "3": [50]}, []) == pytest.approx(0.8)  # R = (1 + 1/2 + 1/2) / 3
    assert f1({"a": [30], "b": [30, 60]}, []) == pytest.approx(10 / 17)  # R = (1/2 + 1/3) / 2 = 5/12
    assert f1({"a": [], "b": []}, []) == 1.0  # nothing annotated: predicting nothing is perfect
    assert f1({"a": [], "b": []}, [40]) == pytest.approx(2 / 3)  # P = 1/2, R = 1


def test_true_points_are_served_in_the_order_of_tcpdbenchs_sets_not_sorted():
    # {3, 9} plus 0 iterates 0, 9, 3 (9 lands in the slot after 0): 9 takes 6 (a tie with 12, the smaller wins),
    # so 3 finds nothing; served in ascending order, 3 would take 6 and 9 take 12 (F1 = 1)
    assert f1({"a": [3, 9]}, [6, 12]) == pytest.approx(2 / 3)


def test_values_stay_as_published_when_positive_else_go_onto_one_to_two():
    assert positive([3.0, None, 6.0], AS_PUBLISHED) == [3.0, None, 6.0]
    assert positive([-1.0, None, 0.0, 3.0], AS_PUBLISHED) == [1.0, None, 1.25, 2.0]
    assert positive([3.0, 6.0], UNIT_RANGE) == [1.0, 2.0]
    assert positive([5.0, 5.0], UNIT_RANGE) == [1.0, 1.0]


def _stepped(missing: int | None = None) -> list[float | None]:
    """60 runs at 100 with a 1% wobble, then 40 at 130."""
    values: list[float | None] = [(100.0 if i < 60 else 130.0) * (1 + 0.005 * ((i * 7) % 5 - 2)) for i in range(100)]
    if missing is not None:
        values[missing] = None
    return values


@pytest.mark.parametrize("missing", [None, 62])
def test_the_scan_finds_a_rise_at_its_index_only_when_rises_are_worse(missing):
    cfg = RegressConfig()
    rises = change_points(scan("toy", _stepped(missing), RISES, cfg))
    falls = change_points(scan("toy", _stepped(missing), FALLS, cfg))
    assert rises[COUNTED] and all(abs(p - 60) <= 1 for p in rises[COUNTED])
    assert falls[COUNTED] == set()


def test_a_series_is_scored_against_zero_in_both_directions():
    rows = score([Labelled("toy", _stepped(), {"a": [60], "b": [61]})], AS_PUBLISHED, RegressConfig())
    (row,) = rows
    assert row["zero"] == pytest.approx(2 / 3)  # R = 1/2 for each annotator, P = 1
    assert row[RISES][COUNTED]["f1"] == pytest.approx(1.0)
    assert row[FALLS][COUNTED]["f1"] == pytest.approx(2 / 3)  # nothing found: zero's score
    assert row["both"]["f1"] == pytest.approx(1.0)


def _tcpd(tmp_path, annotations: dict, datasets: dict) -> None:
    (tmp_path / "annotations.json").write_text(json.dumps(annotations))
    for name, columns in datasets.items():
        folder = tmp_path / "datasets" / name
        folder.mkdir(parents=True)
        (folder / f"{name}.json").write_text(json.dumps({"name": name, "series": [{"raw": c} for c in columns]}))


def test_multivariate_and_absent_series_are_left_out_with_the_reason(tmp_path):
    _tcpd(tmp_path, {"one": {"6": [2]}, "two": {"6": []}, "gone": {"6": []}},
          {"one": [[1, 2, None, 4]], "two": [[1, 2], [3, 4]]})
    series, left_out = load(tmp_path)
    assert [(s.name, s.values, s.annotations) for s in series] == [("one", [1.0, 2.0, None, 4.0], {"6": [2]})]
    reasons = dict(left_out)
    assert set(reasons) == {"two", "gone"}
    assert "multivariate" in reasons["two"] and "download" in reasons["gone"]


def test_a_directory_that_is_not_tcpd_is_refused_with_exit_2(tmp_path, capsys):
    assert main(["--tcpd", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "annotations.json not found" in err and "alan-turing-institute/TCPD" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(StudyError, match="cannot read"):
        (tmp_path / "annotations.json").write_text("{")
        load(tmp_path)
