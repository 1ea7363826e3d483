"""How fast is ingest on a real asv results corpus of many small files?

Ingests a results tree that someone else's `asv run` wrote (fetched by the
user; never part of this repository) into a new database in a temporary
folder, then ingests it again with nothing changed, a few times over.
With `--machines K` the corpus's files are first dealt out round-robin to K
machines (a copy in the temporary folder, each file's machine renamed to
match), to time a tree of many machines with the same files. Run:

    python -m studies.ingest_speed PATH/TO/results [--subject NAME] [--runs 3] [--machines K]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from flybench.store import ingest


def spread(corpus: Path, out: Path, machines: int) -> Path:
    """A copy of `corpus` with its results files dealt out to `machines` machines."""
    files = sorted(p for d in corpus.iterdir() if d.is_dir() for p in d.glob("*.json") if p.name != "machine.json")
    template = json.loads(next(corpus.glob("*/machine.json")).read_text())
    out.mkdir()
    if (corpus / "benchmarks.json").is_file():
        (out / "benchmarks.json").write_bytes((corpus / "benchmarks.json").read_bytes())
    for i, path in enumerate(files):
        name = f"machine-{i % machines:04d}"
        folder = out / name
        if not folder.is_dir():
            folder.mkdir()
            (folder / "machine.json").write_text(json.dumps({**template, "machine": name}))
        data = json.loads(path.read_text())
        data["params"]["machine"] = name
        (folder / path.name).write_text(json.dumps(data))
    return out


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the parse workers, once joined)."""
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF,
                                                                         resource.RUSAGE_CHILDREN)))


def run_once(tree: Path, db: Path, subject: str) -> tuple[float, float, int, int, float]:
    """Seconds (wall and CPU) and rows of a first ingest, files read, and the seconds of an ingest with
    nothing changed. CPU seconds say more than wall time on a machine that others share."""
    start, cpu = time.perf_counter(), cpu_seconds()
    first = ingest(tree, db, subject)
    first_s, first_cpu = time.perf_counter() - start, cpu_seconds() - cpu
    if not first.ok:
        print(first.summary())
    start = time.perf_counter()
    again = ingest(tree, db, subject)
    again_s = time.perf_counter() - start
    assert not again.loaded, "nothing changed, yet files were read again"
    return first_s, first_cpu, first.rows, len(first.loaded) + len(first.errors), again_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="an asv results tree (results_dir)")
    parser.add_argument("--subject", help="subject to file it under (default: the folder above results)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--machines", type=int, default=0, help="deal the files out to this many machines")
    args = parser.parse_args()
    subject = args.subject or args.corpus.resolve().parent.name
    firsts, agains = [], []
    with tempfile.TemporaryDirectory() as folder:
        tree = spread(args.corpus, Path(folder) / "results", args.machines) if args.machines else args.corpus
        machines = sum(1 for d in tree.iterdir() if d.is_dir())
        for run in range(args.runs):
            first_s, first_cpu, rows, files, again_s = run_once(tree, Path(folder) / f"run{run}.duckdb", subject)
            firsts.append(first_s)
            agains.append(again_s)
            print(f"run {run + 1}: {files} files on {machines} machines, {rows} rows: first ingest {first_s:.2f} s "
                  f"({rows / first_s:,.0f} rows/s; {first_cpu:.2f} CPU s), again with nothing changed {again_s:.3f} s "
                  f"({again_s / files * 1000:.3f} s per 1,000 files)")
    first_s, again_s = statistics.median(firsts), statistics.median(agains)
    print(f"median: first ingest {first_s:.2f} s = {rows / first_s:,.0f} rows/s; "
          f"unchanged {again_s:.3f} s = {again_s / files * 1000:.3f} s per 1,000 files")


if __name__ == "__main__":
    main()
