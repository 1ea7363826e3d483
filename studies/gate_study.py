"""Does `flybench gate` hold on the pull request's real path? A/A heads and planted slowdowns, process per round.

Nothing here measures in one process: the study makes a scratch repository
of this project with three commits and lets `flybench gate` measure them
exactly as the pull-request job does (worktrees, one `flybench run` process
per side, workload and round, adaptive rounds, the PR config).

- `prepare OUT`: the repository at OUT, with `base` (this checkout's files),
  `aa` (base plus a docs file: an A/A head) and `planted` (base plus a
  device spin after each call of the planted providers' kernels, inside the
  timed call: +5% for half the cases and +10% for the other half, chosen
  by a hash of the case's name, calibrated in each process against the
  call's own graph-replayed time; the spin's size is printed to the case's
  stderr), `family` (base plus a comment in the Triton MoE kernels' module:
  a change to one kernel family that leaves its code as it was) and
  `shared` (base plus a comment in the measuring harness, which every
  timed case runs through).
- then, on a GPU: `flybench gate base planted --repo OUT ...` and
  `flybench gate base aa --repo OUT ...`, each with `--json`;
- `report JSON...`: the false verdicts among unplanted cases, the planted
  cases caught per size among those whose detectable change allows it,
  the ambiguous cases and their rounds, and the wall time.

    python -m studies.gate_study prepare /tmp/subject
    flybench gate base planted --repo /tmp/subject -w moe -p triton -p torch -d bf16 \\
        --config .github/flybench-pr.toml --json planted.json
    python -m studies.gate_study report planted.json aa.json --planted triton
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("flybench", "benchmarks", "asv.conf.json", "pyproject.toml")
PLANTED_PROVIDERS = ("triton",)
SIZES = (0.05, 0.10)

PLANT = '''

def _planted(runner, case_name):
    """A study's plant (studies/gate_study.py): the call, then a device spin of 5% or 10% of its own time."""
    import hashlib
    import sys

    import torch

    size = (0.05, 0.10)[int(hashlib.sha1(case_name.encode()).hexdigest(), 16) % 2]
    runner()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)
    start.record()
    torch.cuda._sleep(20_000_000)
    end.record()
    torch.cuda.synchronize()
    rate = 20_000_000 / (start.elapsed_time(end) * 1e-3)
    call = runner
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            runner()
        call = graph.replay
    except Exception:  # noqa: BLE001 - timed eagerly where it cannot be captured
        torch.cuda.synchronize()
    times = []
    for _ in range(30):
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    seconds = sorted(times)[len(times) // 2]
    cycles = int(size * seconds * rate)
    print(f"plant: {case_name} +{100 * size:.0f}% of {seconds * 1e6:.1f} us = {cycles} cycles", file=sys.stderr)

    def planted():
        out = runner()
        torch.cuda._sleep(cycles)
        return out
    return planted
'''
HOOK = "    runner = provider.build(case, dtype, inputs, device)\n"


def planted_size(case: str) -> float:
    """The plant's size for a case, as the planted commit chooses it."""
    return SIZES[int(hashlib.sha1(case.encode()).hexdigest(), 16) % 2]


def prepare(out: Path) -> dict[str, str]:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, out / name)
    (out / ".gitignore").write_text("results/\n.asv/\n__pycache__/\n")
    _git(out, "init", "-q", "-b", "main")  # the branch asv.conf.json names
    commits = {"base": _commit(out, "base")}
    _git(out, "branch", "base")
    _git(out, "checkout", "-q", "-b", "aa", "base")
    (out / "NOTES.md").write_text("A docs-only change: an A/A head.\n")
    commits["aa"] = _commit(out, "docs only")
    _git(out, "checkout", "-q", "-b", "planted", "base")
    case_py = out / "flybench" / "measure" / "case.py"
    text = case_py.read_text()
    if HOOK not in text:
        raise SystemExit(f"the plant's hook line is not in {case_py}: update studies/gate_study.py")
    hooked = HOOK + f"    if provider_name in {PLANTED_PROVIDERS!r} and device.kind != 'cpu':\n" \
                    "        runner = _planted(runner, case.name)\n"
    case_py.write_text(text.replace(HOOK, hooked) + PLANT)
    commits["planted"] = _commit(out, "planted slowdown")
    for branch, path, message in (("family", "flybench/kernels/triton/moe.py", "Triton MoE: a comment"),
                                  ("shared", "flybench/measure/timing.py", "timing harness: a comment")):
        _git(out, "checkout", "-q", "-b", branch, "base")
        with (out / path).open("a") as f:
            f.write(f"# {message} ({branch} head of studies/gate_study.py)\n")
        commits[branch] = _commit(out, message)
    print(json.dumps(commits))
    return commits


def report(paths: list[Path], planted: tuple[str, ...]) -> dict:
    """The study's figures from the gate's JSON reports."""
    rows = []
    for path in paths:
        data = json.loads(path.read_text())
        label = path.stem
        for case in data["cases"]:
            provider = case["params"].get("provider")
            plant = planted_size(case["params"]["case"]) if (label.startswith("planted")
                                                             and provider in planted) else 0.0
            rows.append({"run": label, "case": case["params"]["case"], "provider": provider,
                         "verdict": case["verdict"], "change": case.get("relative"), "plant": plant,
                         "rounds": case.get("rounds"), "detectable": case.get("detectable"),
                         "interval": case.get("interval")})
    unplanted = [r for r in rows if not r["plant"] and r["rounds"]]
    false = [r for r in unplanted if r["verdict"] in ("regression", "improvement")]
    figures = {"unplanted_cases": len(unplanted), "false_verdicts": false, "by_size": {}}
    for size in SIZES:
        group = [r for r in rows if r["plant"] == size]
        reachable = [r for r in group if r["detectable"] is not None and r["detectable"] <= size]
        figures["by_size"][f"{100 * size:.0f}%"] = {
            "planted": len(group), "detectable_allows": len(reachable),
            "caught_of_those": sum(r["verdict"] == "regression" for r in reachable),
            "caught_of_all": sum(r["verdict"] == "regression" for r in group),
            "realized_changes": sorted(round(100 * r["change"], 1) for r in group if r["change"] is not None)}
    figures["ambiguous"] = [{k: r[k] for k in ("run", "case", "provider", "rounds", "plant", "detectable")}
                            for r in rows if r["verdict"] == "ambiguous"]
    figures["rounds"] = sorted({tuple(r["rounds"]) for r in rows if r["rounds"]})
    figures["rows"] = rows
    return figures


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=study", "-c", "user.email=study@example.com", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def _git(repo: Path, *words: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *words], check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.gate_study", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("prepare").add_argument("out", type=Path)
    summary = sub.add_parser("report")
    summary.add_argument("json", type=Path, nargs="+")
    summary.add_argument("--planted", action="append", default=None, help="planted providers (default: triton)")
    summary.add_argument("--output", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(args.out)
        return 0
    figures = report(args.json, tuple(args.planted or PLANTED_PROVIDERS))
    text = json.dumps(figures, indent=2)
    if args.output:
        args.output.write_text(text + "\n")
    shown = {k: v for k, v in figures.items() if k != "rows"}
    print(json.dumps(shown, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
