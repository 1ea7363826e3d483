"""Every page's state round-trips through the address: a page opened with its parameters shows them in its
widgets, a change of a widget changes the address, and a value from the address that matches nothing is said."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.asv_project import MACHINE, PROJECT
from test_dashboard_db import SECOND, DashboardDB, ci_store, dash_db  # noqa: F401  (fixtures)
from test_dashboard_pages import ci_db, db, open_page, texts  # noqa: F401  (fixtures)
from test_import_flydsl_ci import records as flydsl_ci_records


def address(at, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) else value


def pushes_of(pr: int) -> list[str]:
    raw = [r for r in flydsl_ci_records() if r.get("pr") == pr]
    return [c for _, c in sorted({(r["ts"], r["commit"]) for r in raw}, reverse=True)]


def test_the_pull_request_page_keeps_its_pull_request_and_push_in_the_address(ci_db: Path) -> None:  # noqa: F811
    newest, *older = list(dict.fromkeys(pushes_of(812)))
    at = open_page(ci_db, "pull_request", pr="812")
    assert at.selectbox(key="pr").value == "812" and address(at, "pr") == "812"  # kept, though the default
    assert at.selectbox(key="push").value == newest
    push = older[0]
    at.selectbox(key="push").set_value(push).run()
    assert address(at, "push") == push and address(at, "pr") == "812"
    assert any(h.startswith(f"{push[:8]} (") for h in texts(at, "subheader"))


def test_a_push_given_by_its_hash_opens_that_push(ci_db: Path) -> None:  # noqa: F811
    push = list(dict.fromkeys(pushes_of(812)))[-1]  # the oldest: never the default
    for given in (push, push[:8], push[:7].upper()):
        at = open_page(ci_db, "pull_request", pr="812", push=given)
        assert at.selectbox(key="push").value == push and address(at, "push") == push, given
        assert not texts(at, "warning")
        assert any(h.startswith(f"{push[:8]} (") for h in texts(at, "subheader"))


def test_a_push_or_pull_request_that_matches_nothing_is_said(ci_db: Path) -> None:  # noqa: F811
    at = open_page(ci_db, "pull_request", pr="812", push="deadbee **x**")
    (warning,) = texts(at, "warning")
    assert warning.startswith("Push deadbee \\*\\*x\\*\\*: nothing on this page for it. Showing ")
    at = open_page(ci_db, "pull_request", pr="99999")
    assert texts(at, "warning")[0].startswith("Pull request 99999: nothing on this page for it")


def test_the_pull_request_page_spells_tflops_one_way(ci_db: Path) -> None:  # noqa: F811
    at = open_page(ci_db, "pull_request", pr="812")
    units = set(next(t.value for t in at.dataframe if "base_source" in t.value.columns)["unit"])
    assert "TFLOPS" not in units and "TFLOP/s" in units


def shown_address(at) -> dict[str, str | list[str]]:
    """The address as the browser shows it after a run: the parameters the page set by hand, and each widget bound
    to a parameter (`bind="query-params"`, the proto's query_param_key) at its value, which the browser writes."""
    params = {k: v for k, v in at.query_params.items()}
    for kind in ("selectbox", "multiselect", "radio", "toggle"):
        for widget in at.get(kind):
            key = getattr(widget.proto, "query_param_key", "")
            if key:
                value = widget.value
                params[key] = [str(v) for v in value] if isinstance(value, list) else \
                    str(value).lower() if isinstance(value, bool) else str(value)
    return params


def reopened(at, page: str | None, path: Path) -> dict[str, object]:
    """Every widget's value after opening the page anew on the address the page showed."""
    again = open_page(path, page, **shown_address(at))
    return widget_values(again)


def widget_values(at) -> dict[str, object]:
    return {w.key: w.value for kind in ("selectbox", "multiselect", "radio", "toggle") for w in at.get(kind)
            if w.key and not w.key.startswith("$$")}


def test_history_opens_on_its_address_and_writes_each_change_back(db: DashboardDB) -> None:  # noqa: F811
    at = open_page(db.path, "history", subject=PROJECT, benchmark="attention.Quick.track_time", log="true")
    assert at.selectbox(key="benchmark").value == "attention.Quick.track_time" and at.toggle(key="log").value
    picker = at.selectbox(key="benchmark")
    picker.select(next(o for o in picker.options if o != "attention · Quick · time")).run()
    chosen = at.selectbox(key="benchmark").value
    assert address(at, "benchmark") == chosen != "attention.Quick.track_time"  # kept by hand: the id
    at.toggle(key="log").set_value(False).run()
    at.multiselect(key="machine").set_value([SECOND]).run()
    assert shown_address(at)["machine"] == [SECOND] and shown_address(at)["log"] == "false"
    assert reopened(at, "history", db.path) == widget_values(at)


def test_compare_opens_on_its_address_and_writes_each_change_back(db: DashboardDB) -> None:  # noqa: F811
    at = open_page(db.path, "compare", repo=PROJECT)
    head = at.selectbox(key="head")
    head.select(next(o for o in head.options if o != head.format_func(head.value))).run()
    assert address(at, "head") == at.selectbox(key="head").value
    assert reopened(at, "compare", db.path) == widget_values(at)
    at.radio(key="mode").set_value("two machines").run()
    assert shown_address(at)["mode"] == "two machines"
    assert reopened(at, "compare", db.path) == widget_values(at)


def test_a_choice_the_address_names_that_no_option_matches_is_said(db: DashboardDB) -> None:  # noqa: F811
    at = open_page(db.path, "compare", mode="three machines")
    assert any(w.startswith("Compare three machines: no such choice") for w in texts(at, "warning"))
    at = open_page(db.path, "history", subject=PROJECT, benchmark="attention.Quick.track_time", params="no-case")
    assert any(w.startswith("Case no-case: nothing on this page for it. Showing ") for w in texts(at, "warning"))
    at = open_page(db.path, "resources", kernel="no_such_kernel")
    assert any(w.startswith("Kernel no_such_kernel: nothing on this page") for w in texts(at, "warning"))


def test_kernel_resources_open_on_their_address_and_write_each_change_back(db: DashboardDB) -> None:  # noqa: F811
    at = open_page(db.path, "resources", kernel="flash_attn_generic", by_commit="true")
    assert at.selectbox(key="kernel").value == "flash_attn_generic" and at.toggle(key="by_commit").value
    metric = at.multiselect(key="metric")
    metric.set_value([metric.options[0]]).run()
    assert shown_address(at)["metric"] == [at.multiselect(key="metric").options[0]]
    assert reopened(at, "resources", db.path) == widget_values(at)


@pytest.mark.parametrize("page", [None, "roofline"])
def test_overview_and_roofline_keep_their_filters_in_the_address(db: DashboardDB, page: str | None) -> None:  # noqa: F811
    at = open_page(db.path, page, subject=PROJECT, machine=MACHINE)
    assert at.multiselect(key="machine").value == [MACHINE]
    at.multiselect(key="machine").set_value([SECOND]).run()
    assert shown_address(at)["machine"] == [SECOND]
    assert reopened(at, page, db.path) == widget_values(at)
