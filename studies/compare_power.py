"""Does `flybench compare` catch a real 3-10% regression on a GPU, and does it stay quiet on no change?

Step 1, on a GPU, in a git work tree of this repository (`run`): three
`flybench run` invocations of the same cases, each attributed to its own
commit, in this order:

- BASE: HEAD as it is;
- PLANT: a commit that adds one extra elementwise pass over every output of
  every case (`out.mul_(1)`, values unchanged, so the correctness gate still
  passes): a real slowdown whose size differs by case (a few percent on a
  GEMM, a large fraction on a copy);
- AA: an empty commit, the same code as BASE, run last (so drift between
  runs shows up as false alarms, as it would in CI).

The two commits are written as objects under refs/study/ (the work tree
and the branch are not moved; only case.py is swapped while PLANT runs). Step 2, anywhere (`report`): ingest the results, run
`flybench.regress.compare` for BASE->PLANT and BASE->AA at several relative
thresholds, and print the table (markdown) and JSON.

    python -m studies.compare_power run --results /tmp/power -w gemm -w attention -p torch -d bf16
    python -m studies.compare_power report /tmp/power --out docs/data/compare-power.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE_PY = "flybench/measure/case.py"
PLANT_AT = "    runner = provider.build(case, dtype, inputs, device)\n"
PLANT = PLANT_AT.replace("runner =", "built =") + (
    "    def runner():  # planted regression: one extra pass over every output\n"
    "        out = built()\n"
    "        for tensor in out.values():\n"
    "            tensor.mul_(1)\n"
    "        return out\n")
THRESHOLDS = (0.20, 0.05, 0.03, 0.02)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), "-c", "user.name=flybench-study", "-c",
                           "user.email=study@flybench.invalid", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def commit_tree(tree: str, parent: str, message: str) -> str:
    """A commit object (kept under refs/study/) without touching the work tree or the index."""
    sha = git("commit-tree", tree, "-p", parent, "-m", message)
    git("update-ref", f"refs/study/{sha[:12]}", sha)
    return sha


def planted_tree(planted_text: str) -> str:
    """HEAD's tree with flybench/measure/case.py replaced, built in a scratch index."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        blob = subprocess.run(["git", "-C", str(ROOT), "hash-object", "-w", "--stdin"], input=planted_text,
                              capture_output=True, text=True, check=True).stdout.strip()
        for args in (["read-tree", "HEAD"], ["update-index", "--cacheinfo", f"100644,{blob},{CASE_PY}"]):
            subprocess.run(["git", "-C", str(ROOT), *args], env=env, check=True)
        return subprocess.run(["git", "-C", str(ROOT), "write-tree"], env=env, capture_output=True, text=True,
                              check=True).stdout.strip()


def run(args: argparse.Namespace) -> int:
    case_py = ROOT / CASE_PY
    original = case_py.read_text()
    if PLANT_AT not in original:
        raise SystemExit(f"{CASE_PY} changed: update PLANT_AT in this study")
    planted = original.replace(PLANT_AT, PLANT)
    base = git("rev-parse", "HEAD")
    plant = commit_tree(planted_tree(planted), base, "study: planted regression (one extra pass over every output)")
    aa = commit_tree(git("rev-parse", "HEAD^{tree}"), plant, "study: A/A (the same code as the base)")
    filters = [f"--{name}={value}" for name in ("workload", "provider", "dtype")
               for value in getattr(args, name) or []]
    plan = {"base": base, "plant": plant, "aa": aa}
    try:
        for label in ("base", "plant", "aa"):
            case_py.write_text(planted if label == "plant" else original)
            command = [sys.executable, "-m", "flybench", "run", "--set", args.set, "--machine", args.machine,
                       "--commit", plan[label], *filters]
            print(f"{label}: {' '.join(command[3:])}", flush=True)
            subprocess.run(command, cwd=ROOT, check=False)
    finally:
        case_py.write_text(original)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "results" / "flybench" / args.machine, out / args.machine, dirs_exist_ok=True)
    shutil.copy(ROOT / "results" / "flybench" / "benchmarks.json", out / "benchmarks.json")
    (out / "study.json").write_text(json.dumps(plan, indent=1))
    return 0


def report(args: argparse.Namespace) -> int:
    from flybench.regress.compare import compare  # the store's packages are needed here only, not on the GPU host
    from flybench.regress.config import RegressConfig
    from flybench.store import ingest

    results = Path(args.results)
    plan = json.loads((results / "study.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "power.duckdb"
        ingest(results, db, subject="flybench")
        machine = next(p.name for p in results.iterdir() if (p / "machine.json").is_file())
        rows = []
        for threshold in THRESHOLDS:
            config = RegressConfig(relative=threshold)
            for label in ("plant", "aa"):
                found = compare(db, machine, plan["base"], plan[label], config=config)
                for case in found.cases:
                    if case.unit == "seconds":
                        rows.append({"threshold": threshold, "pair": label, "params": case.params,
                                     "base_s": case.base, "head_s": case.head, "relative": case.relative,
                                     "p_value": case.p_value, "verdict": case.verdict})
    print(markdown(rows))
    if args.out:
        Path(args.out).write_text(json.dumps({"plan": plan, "rows": rows}, indent=1))
    return 0


def markdown(rows: list[dict]) -> str:
    """One line per case: the planted and the A/A change, and the verdict at each threshold."""
    cases = sorted({json.dumps(r["params"]) for r in rows})
    lines = ["| case | planted change | A/A change | p (planted) | " +
             " | ".join(f"verdict at {t:.0%} (planted / A/A)" for t in THRESHOLDS) + " |",
             "| --- | ---: | ---: | ---: |" + " --- |" * len(THRESHOLDS)]
    for key in cases:
        mine = [r for r in rows if json.dumps(r["params"]) == key]
        pick = {(r["threshold"], r["pair"]): r for r in mine}
        plant, aa = pick.get((THRESHOLDS[0], "plant")), pick.get((THRESHOLDS[0], "aa"))
        if not plant or not aa or plant["relative"] is None or aa["relative"] is None:
            continue
        verdicts = [f"{pick[(t, 'plant')]['verdict']} / {pick[(t, 'aa')]['verdict']}" for t in THRESHOLDS]
        p = plant["p_value"]
        label = ", ".join(str(v) for v in json.loads(key).values())
        lines.append(f"| {label} | {plant['relative']:+.1%} | {aa['relative']:+.1%} | "
                     f"{'-' if p is None else f'{p:.1e}'} | " + " | ".join(verdicts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.compare_power", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    step = sub.add_parser("run", help="on a GPU: measure BASE, PLANT and AA")
    step.add_argument("--results", type=Path, required=True, help="where to copy the study's results tree")
    step.add_argument("--set", default="quick")
    step.add_argument("--machine", default="h200-compare-study", help="asv machine name, kept apart from real runs")
    step.add_argument("--workload", "-w", action="append")
    step.add_argument("--provider", "-p", action="append")
    step.add_argument("--dtype", "-d", action="append")
    step = sub.add_parser("report", help="compare PLANT and AA with BASE at several thresholds")
    step.add_argument("results", type=Path)
    step.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    return run(args) if args.step == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
