"""Which of a history's steps fell over ranges that changed only the compiler, and what the machine code said.

FlyDSL's CI builds FlyDSL from the commit it measures, so a range whose only
changes are to the compiler (`python/flydsl`, `lib`, `include`, ...) can be
the code's or the runner's. The history scan asks the machine code of the
series' kernels (`machine_code`, `python -m flybench.compile.code_history`)
and falls back to files, with the compiler counted as code, where there is
none. This lists every main step of the stored history (alerts and the
environment's steps) whose range changed the compiler and nothing else the
series runs, with the verdict and the evidence it rests on.

    python -m studies.compiler_steps --db STORE --subject flydsl --out docs/data/compiler-steps.md

The store is one `flybench import flydsl-ci ... --flydsl-repo` and `flybench ingest results/flydsl` built
(the machine code), or `--history`, `--flydsl-repo` and `--machine-code` to build it in a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path

from flybench.importers.flydsl_ci.store import import_file
from flybench.regress import alerts, scan, stored
from flybench.store import connect, machine_code


def steps(db: Path, subject: str) -> list[dict]:
    """Every main step over a compiler-only range: machine, series, range, change, verdict and basis."""
    rows = []
    with connect(db, read_only=True) as conn:
        found = conn.execute(
            "SELECT machine, benchmark, params::VARCHAR, last_good, first_bad, before, after, kind, evidence, "
            "'alert' FROM alerts WHERE subject = ? AND runs = 'main' UNION ALL "
            "SELECT machine, benchmark, params::VARCHAR, last_good, first_bad, before, after, kind, evidence, "
            "'step' FROM regression_steps WHERE subject = ? AND runs = 'main' AND kind = 'environment'",
            [subject, subject]).fetchall()
    attributions: dict[str, scan.Attribution] = {}
    for machine, benchmark, params, last_good, first_bad, before, after, kind, evidence, table in found:
        att = attributions.setdefault(machine, stored.attribution(db, subject, machine))
        between = att.commits(last_good, first_bad)
        if not between:
            continue
        own, compiler = att.changed(benchmark, alerts.canonical(params), between)
        if own or not compiler:
            continue
        basis = "machine code" if "(machine code" in evidence else "files only"
        rows.append({"machine": machine, "series": f"{benchmark} {params}", "range": f"{last_good[:8]}..{first_bad[:8]}",
                     "change_pct": round(100 * (after - before) / before, 1), "verdict": "code" if table == "alert"
                     else "environment", "basis": basis, "evidence": evidence})
    return rows


def table(rows: list[dict]) -> str:
    counts = collections.Counter((r["verdict"], r["basis"]) for r in rows)
    lines = ["| verdict | rests on | steps |", "| --- | --- | ---: |",
             *[f"| {v} | {b} | {n} |" for (v, b), n in sorted(counts.items())], "",
             "| machine | series | range | change | verdict | evidence |", "| --- | --- | --- | ---: | --- | --- |",
             *[f"| {r['machine']} | `{r['series']}` | {r['range']} | {r['change_pct']:+.1f}% | {r['verdict']} | "
               f"{r['evidence'].replace('|', '/')} |" for r in rows]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.compiler_steps", description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a store with the history, its code attribution and machine code")
    parser.add_argument("--history", type=Path, help="or: FlyDSL's CI history to import into a temporary store")
    parser.add_argument("--flydsl-repo", type=Path)
    parser.add_argument("--machine-code", type=Path, metavar="TREE", help="a tree holding machine-code.jsonl")
    parser.add_argument("--subject", default="flydsl")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        db = args.db
        if db is None:
            db = Path(work) / "store.duckdb"
            import_file(args.history, db, args.subject, flydsl_repo=args.flydsl_repo)
            if args.machine_code:
                with connect(db) as conn:
                    code = machine_code.read(args.machine_code)  # None: the tree holds no machine code file
                    if code is not None:
                        machine_code.store(conn, args.subject, code)
            stored.refresh(db)
        rows = steps(db, args.subject)
    text = table(rows)
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
