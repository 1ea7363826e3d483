"""Does `flybench gate` hold on the pull request's real path? A/A heads and planted slowdowns, process per round.

Nothing here measures in one process: the study makes a scratch repository
of this project with a few commits and lets `flybench gate` measure them
exactly as the pull-request job does (worktrees, one `flybench run` process
per side, workload and round, adaptive rounds, the PR config).

- `prepare OUT`: the repository at OUT, with `base` (this checkout's files),
  `aa` (base plus a docs file: an A/A head that selects nothing),
  `family` (base plus a comment in the Triton MoE kernels' module: a change
  to one kernel family that leaves its code as it was), `planted` (base
  plus, in that same module, a device spin after every Triton MoE call,
  inside the timed call: +4% for about half the cases and +6% for the
  others, chosen by a hash of the case's name and dtype, calibrated in each
  process against the call as the timing harness times it, graph-replayed
  with the cache flushed before each sample; the spin's size is printed to
  the case's stderr) and `shared` (base plus a comment in the measuring
  harness, which every timed case runs through). The family and planted
  heads change the same file, so the diff selects the same cases for both.
  Two more for the selection by machine code: `comment` (a comment inside
  a `@triton.jit` helper of the diffusion-attention module: its cases
  compile identically, so nothing is timed) and `retune` (the sm_90 bf16
  MoE table: bucket 2 `num_stages` 4 -> 3, bucket 3 `BLOCK_N` 128 -> 64:
  only the cases launching those buckets are timed).
- then, on a GPU: `flybench gate base family --repo OUT ...` and
  `flybench gate base planted --repo OUT ...`, each with `--json`;
- `judge WORKDIR`: the comparison of the rounds a gate left in its workdir
  (a gate stopped by a time limit), judged as the gate judges them;
- `report JSON...`: the false verdicts among unplanted subject cases, the
  planted cases caught per size among those whose detectable change allows
  it, the ambiguous cases and their rounds, and the controls' verdicts.

    python -m studies.gate_study prepare /tmp/subject
    flybench gate base family --repo /tmp/subject --config .github/flybench-pr.toml --json aa-family.json
    flybench gate base planted --repo /tmp/subject --config .github/flybench-pr.toml --json planted-family.json
    python -m studies.gate_study report planted-family.json aa-family.json --planted triton
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
SIZES = (0.04, 0.06)
PLANTED_MODULE = "flybench/kernels/triton/moe.py"
COMMENTED_MODULE = "flybench/kernels/triton/diffusion_attention.py"

PLANT = '''

# A study's plant (studies/gate_study.py, planted head): every Triton MoE call on a GPU is followed, inside the
# call, by a device spin of {sizes} of the call's own time as the timing harness times it.
import hashlib as _hashlib  # noqa: E402
import sys as _sys  # noqa: E402

_unplanted_plan = plan
_PLANT_SIZES = {sizes!r}


@dataclass
class _PlantedPlan(MoePlan):
    cycles: int = 0

    def __call__(self) -> dict[str, torch.Tensor]:
        out = super().__call__()
        torch.cuda._sleep(self.cycles)
        return out


def _planted_case():
    frame = _sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return None
        case, dtype = frame.f_locals.get("case"), frame.f_locals.get("dtype")
        if hasattr(case, "name") and isinstance(dtype, str):
            return f"{{case.name}}/{{dtype}}"
        frame = frame.f_back
    return None


def _harness_seconds(call) -> float:
    # graph replay when the call can be captured, the cache flushed before each sample, events around each
    call()
    call()
    torch.cuda.synchronize()
    timed = call
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        timed = graph.replay
    except Exception:  # noqa: BLE001 - timed directly where it cannot be captured, as the harness does
        torch.cuda.synchronize()
    flush = torch.zeros(max(2 * torch.cuda.get_device_properties(0).L2_cache_size, 1 << 20) // 4,
                        dtype=torch.int32, device="cuda")
    for _ in range(10):
        timed()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(60)]
    for start, end in events:
        flush.add_(1)
        start.record()
        timed()
        end.record()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) * 1e-3 for start, end in events)
    return times[len(times) // 2]


def plan(inputs, top_k, config):
    built = _unplanted_plan(inputs, top_k, config)
    name = _planted_case() if inputs["x"].is_cuda else None
    if name is None:
        return built
    size = _PLANT_SIZES[int(_hashlib.sha1(name.encode()).hexdigest(), 16) % len(_PLANT_SIZES)]
    seconds = _harness_seconds(built)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)
    start.record()
    torch.cuda._sleep(20_000_000)
    end.record()
    torch.cuda.synchronize()
    rate = 20_000_000 / (start.elapsed_time(end) * 1e-3)
    cycles = int(size * seconds * rate)
    print(f"plant: {{name}} +{{100 * size:.0f}}% of {{seconds * 1e6:.1f}} us = {{cycles}} cycles", file=_sys.stderr)
    return _PlantedPlan(built.launches, built.routing, built.pairs, built.out32, built.out_dtype, cycles)
'''.format(sizes=SIZES)


def planted_size(case: str, dtype: str) -> float:
    """The plant's size for a case, as the planted commit chooses it."""
    return SIZES[int(hashlib.sha1(f"{case}/{dtype}".encode()).hexdigest(), 16) % len(SIZES)]


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
    module = out / PLANTED_MODULE
    text = module.read_text()
    if "\ndef plan(" not in text or "\nclass MoePlan" not in text:
        raise SystemExit(f"the plant's hook (plan, MoePlan) is not in {module}: update studies/gate_study.py")
    module.write_text(text + PLANT)
    commits["planted"] = _commit(out, "Triton MoE: planted slowdown")
    for branch, path, message in (("family", "flybench/kernels/triton/moe.py", "Triton MoE: a comment"),
                                  ("shared", "flybench/measure/timing.py", "timing harness: a comment")):
        _git(out, "checkout", "-q", "-b", branch, "base")
        with (out / path).open("a") as f:
            f.write(f"# {message} ({branch} head of studies/gate_study.py)\n")
        commits[branch] = _commit(out, message)
    _git(out, "checkout", "-q", "-b", "comment", "base")
    module = out / COMMENTED_MODULE
    text = module.read_text()
    place = "    m_new = tl.maximum(m_i, tl.max(scores, axis=1))\n"  # inside the kernel helper _softmax_tile
    if place not in text:
        raise SystemExit(f"the comment's place (_softmax_tile) is not in {module}: update studies/gate_study.py")
    module.write_text(text.replace(place, "    # the running maximum first (comment head of studies/gate_study.py)\n"
                                   + place, 1))
    commits["comment"] = _commit(out, "Triton diffusion attention: a comment")
    _git(out, "checkout", "-q", "-b", "retune", "base")
    retune(out / "flybench/kernels/triton/config_table.py")
    commits["retune"] = _commit(out, "Triton MoE: sm_90 bf16 bucket 2 num_stages 4 -> 3, bucket 3 BLOCK_N 128 -> 64")
    print(json.dumps(commits))
    return commits


def retune(path: Path) -> None:
    """The retune head's change to the configuration table at `path`: sm_90 bf16 MoE bucket 2 `num_stages`
    4 -> 3 and bucket 3 `BLOCK_N` 128 -> 64, written as `tune --write` writes a table."""
    import pprint

    scope: dict = {}
    text = path.read_text()
    exec(compile(text, str(path), "exec"), scope)  # noqa: S102 - the scratch copy's own table, a plain literal
    table = scope["TABLE"]
    buckets = table["sm_90"]["moe"]["bf16"]
    if (buckets[2]["num_stages"], buckets[3]["BLOCK_N"]) != (4, 128):
        raise SystemExit(f"{path}: sm_90 bf16 buckets 2 and 3 are not at num_stages 4 / BLOCK_N 128: update the study")
    buckets[2]["num_stages"], buckets[3]["BLOCK_N"] = 3, 64
    doc = text[:text.index("TABLE = ")]
    path.write_text(doc + "TABLE = " + pprint.pformat(table, width=110, sort_dicts=False) + "\n")


def report(paths: list[Path], planted: tuple[str, ...]) -> dict:
    """The study's figures from the gate's JSON reports (a run named planted* has the plant in `planted`'s cases).

    False verdicts are counted among the unplanted subject cases; the drift
    controls (never failing the check) are listed apart with their verdicts.
    """
    rows = []
    for path in paths:
        data = json.loads(path.read_text())
        label = path.stem
        for case in data["cases"]:
            params = case["params"]
            provider, dtype = params.get("provider"), params.get("dtype", "")
            plant = planted_size(params["case"], dtype) if (label.startswith("planted")
                                                              and provider in planted) else 0.0
            rows.append({"run": label, "case": params["case"], "provider": provider, "dtype": dtype,
                         "role": case.get("role", "subject"), "verdict": case["verdict"],
                         "change": case.get("relative"), "plant": plant, "rounds": case.get("rounds"),
                         "detectable": case.get("detectable"), "interval": case.get("interval"),
                         "noise": case.get("noise")})
    subjects = [r for r in rows if r["role"] == "subject"]
    unplanted = [r for r in subjects if not r["plant"] and r["rounds"]]
    false = [r for r in unplanted if r["verdict"] in ("regression", "improvement")]
    figures = {"unplanted_subject_cases": len(unplanted), "false_verdicts": false, "by_size": {}}
    for size in SIZES:
        group = [r for r in subjects if r["plant"] == size]
        reachable = [r for r in group if r["detectable"] is not None and r["detectable"] <= size]
        figures["by_size"][f"{100 * size:.0f}%"] = {
            "planted": len(group), "detectable_allows": len(reachable),
            "caught_of_those": sum(r["verdict"] == "regression" for r in reachable),
            "caught_of_all": sum(r["verdict"] == "regression" for r in group),
            "called_unchanged": sum(r["verdict"] == "unchanged" for r in group),
            "realized_changes": sorted(round(100 * r["change"], 1) for r in group if r["change"] is not None)}
    verdicts: dict[str, dict[str, int]] = {}
    for r in rows:
        key = f"{r['run']} {r['role']}"
        verdicts.setdefault(key, {})
        verdicts[key][r["verdict"]] = verdicts[key].get(r["verdict"], 0) + 1
    figures["verdicts"] = verdicts
    figures["ambiguous"] = [{k: r[k] for k in ("run", "case", "provider", "dtype", "rounds", "plant", "detectable")}
                            for r in subjects if r["verdict"] == "ambiguous"]
    figures["rounds"] = sorted({tuple(r["rounds"]) for r in rows if r["rounds"]})
    figures["rows"] = rows
    return figures


def judge(workdir: Path, machine: str, config: Path | None, subjects: list[str], json_out: Path | None,
          markdown_out: Path | None) -> int:
    """The comparison of the rounds a gate left in `workdir` (its base/ and head/ worktrees' results), judged as
    the gate judges them, for a gate stopped before it wrote its report."""
    from dataclasses import replace

    from flybench.cli.run import results_dir
    from flybench.regress import exit_code, load_config
    from flybench.regress.compare import compare
    from flybench.regress.report import write
    from flybench.store import ingest

    cfg = load_config(config)
    if subjects:
        cfg = replace(cfg, subject_providers=frozenset(subjects))
    db = workdir / "judged.duckdb"
    db.unlink(missing_ok=True)
    commits = {}
    for side in ("base", "head"):
        tree = workdir / side
        commits[side] = _git(tree, "rev-parse", "HEAD").strip()
        done = ingest(results_dir(tree / "asv.conf.json"), db, config=tree / "asv.conf.json")
        if not done.ok:
            raise SystemExit(f"{side}: the results could not be stored: {done.summary()}")
    comparison = compare(db, machine, commits["base"], commits["head"], config=cfg)
    comparison = replace(comparison, notes=[*comparison.notes, f"judged from the rounds left in {workdir.name} by a "
                                            "gate stopped before its report (studies/gate_study.py judge)"])
    write(comparison, "terminal")
    if json_out:
        write(comparison, "json", json_out)
    if markdown_out:
        write(comparison, "markdown", markdown_out)
    return exit_code(comparison)


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
    judged = sub.add_parser("judge")
    judged.add_argument("workdir", type=Path)
    judged.add_argument("--machine", required=True)
    judged.add_argument("--config", type=Path)
    judged.add_argument("--subject", action="append", default=[], help="subject providers (the gate's selection)")
    judged.add_argument("--json", type=Path)
    judged.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(args.out)
        return 0
    if args.step == "judge":
        return judge(args.workdir, args.machine, args.config, args.subject, args.json, args.markdown)
    figures = report(args.json, tuple(args.planted or PLANTED_PROVIDERS))
    text = json.dumps(figures, indent=2)
    if args.output:
        args.output.write_text(text + "\n")
    shown = {k: v for k, v in figures.items() if k != "rows"}
    print(json.dumps(shown, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
