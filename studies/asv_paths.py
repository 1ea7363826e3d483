"""Wall time of one selection measured by `flybench run` and by a plain `asv run`, and the overhead per case.

Both paths measure each case once, in a process of its own. The case
records say how long each measurement took inside its process
(`measure_s`); what the wall time holds beyond their sum is the per-case
overhead: asv's start-up and discovery, the process of each case, imports,
the device context. The two paths run one after the other on the same
commit, into machines of their own, so neither overwrites the other.

    python -m studies.asv_paths --set quick -w diffusion_attention -p triton -p torch -d bf16 \\
        --commit HASH --machine-prefix h200 --out asv-paths.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from flybench import envvars, hardware
from flybench.measure import record as records
from flybench.selection import asv_regex, choices
from flybench.suite import DIED

ROOT = Path(__file__).resolve().parents[1]


def run(label: str, command: list[str], env: dict[str, str]) -> float:
    print(f"== {label}: {' '.join(command[:8])} ...", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    print(f"== {label}: exit {done.returncode}, {wall:.1f} s", flush=True)
    return wall


def measured(results_dir: Path, machine: str, commit: str) -> list[dict]:
    """The records of the measurements of `commit` on `machine` (placeholders of a died process left out)."""
    found = []
    for path in (results_dir / machine).glob(f"{commit[:8]}-*{records.SUFFIX}"):
        found += [r for r in records.latest(records.read(path)[0]).values() if r["reason"] != DIED]
    return found


def study(args: argparse.Namespace) -> dict:
    device = hardware.detect()
    selection = [c for c in choices(device, args.workload, args.provider, args.dtype) if c.reason is None]
    results_dir = ROOT / "results" / "flybench"
    env = {k: v for k, v in os.environ.items() if k not in (envvars.RUN_ID, envvars.COMMIT, envvars.ENV_NAME,
                                                             envvars.MACHINE, envvars.RESULTS_DIR)}
    env["ASV_PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    flybench_machine, asv_machine = f"{args.machine_prefix}-flybench-run", f"{args.machine_prefix}-asv-run"
    filters = [arg for c in (("-w", args.workload), ("-p", args.provider), ("-d", args.dtype))
               for value in c[1] or [] for arg in (c[0], value)]
    walls = {"flybench run": run("flybench run", [sys.executable, "-m", "flybench", "run", "--set", args.shape_set,
                                                  "--commit", args.commit, "--machine", flybench_machine, *filters],
                                 env)}
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", asv_machine], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    patterns = [arg for pattern in asv_regex(args.shape_set, selection) for arg in ("-b", pattern)]
    walls["asv run"] = run("asv run", [sys.executable, "-m", "asv", "run", "--python=same", "--set-commit-hash",
                                       args.commit, "--machine", asv_machine, "--record-samples", *patterns], env)
    report = {"shape_set": args.shape_set, "commit": args.commit, "device": device.name,
              "selection": [c.__dict__ for c in selection], "paths": {}}
    for label, machine in (("flybench run", flybench_machine), ("asv run", asv_machine)):
        found = measured(results_dir, machine, args.commit)
        inside = sum(r.get("measure_s") or 0.0 for r in found)
        report["paths"][label] = {
            "machine": machine, "wall_s": walls[label], "cases": len(found), "measure_s": inside,
            "overhead_per_case_s": (walls[label] - inside) / len(found) if found else None,
            "ok": sum(r["status"] == "ok" for r in found)}
    fly, plain = report["paths"]["flybench run"], report["paths"]["asv run"]
    report["wall_ratio"] = max(fly["wall_s"], plain["wall_s"]) / min(fly["wall_s"], plain["wall_s"])
    args.out.write_text(json.dumps(report, indent=1))
    for label, path in report["paths"].items():
        print(f"{label:13s} {path['cases']:4d} cases ({path['ok']} ok) in {path['wall_s']:7.1f} s; "
              f"measuring {path['measure_s']:7.1f} s; overhead {path['overhead_per_case_s'] or 0:.2f} s per case")
    print(f"wall-time ratio {report['wall_ratio']:.3f}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.asv_paths", description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", dest="shape_set", default="quick")
    parser.add_argument("--workload", "-w", action="append")
    parser.add_argument("--provider", "-p", action="append")
    parser.add_argument("--dtype", "-d", action="append")
    parser.add_argument("--commit", required=True, help="commit of this repository the results belong to")
    parser.add_argument("--machine-prefix", default="study")
    parser.add_argument("--out", type=Path, required=True)
    study(parser.parse_args())


if __name__ == "__main__":
    main()
