"""Line up the gate's compile half on FlyDSL's regressing pull requests with the later fixes that restored them.

FlyDSL's log names a few fixes together with the earlier pull request whose
slowdown they undo (#1009 for #950, #1035 for #930, #1007 for #974). For each
pair this asks: on the day the regressing pull request was proposed, did
`flybench gate MERGE^1 MERGE --flydsl-repo CLONE --no-timing` (today's
registry, one flydsl wheel for both sides) name the kernels its fix later
restored?

Each gate's JSON report is read from FIXES (`<commit>.wheel-<version>.json`,
written by the commands in docs/gate.md). What each fix restored is read from
its commit message and diff (FlyDSL's own measurements on MI355X) and mapped to
the registry's kernels by hand, below. A library fix (a change to the `flydsl`
package, not to `kernels/`) reaches the compiled code only through the wheel,
so for those the kernels whose machine code the fix changes are measured
directly: the same commit's kernels compiled with the wheel before and after
the fix (`--ab`, two compile caches), compared as the gate compares its sides.

    python -m studies.fix_lineup --flydsl-repo ~/FlyDSL --fixes docs/data/flydsl-replay/fixes \\
        --ab daee90e4 /tmp/fr-cache-pre 0.3.2.dev853+pre1035 /tmp/fr-cache 0.3.2.dev853 \\
        --out docs/data/flydsl-replay/fix-lineup
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pair:
    """A regressing pull request and the later fix that names it."""

    regression: int
    regression_commit: str
    fix: int
    fix_commit: str
    cause: str  # what the regression did, from the fix's message
    restored: tuple[str, ...]  # registry kernels whose slowdown the fix undid (FlyDSL's measurement)
    restored_how: str  # what the fix restored, where, and what FlyDSL measured
    wheel: str  # the one wheel both sides of the regression's gate used
    wheel_why: str
    library_fix: bool = False  # the fix changed the flydsl package, so only the wheel carries it
    answer: str = ""  # overrides the computed yes/partly/no where the registry lacks the shapes that slowed


PAIRS = (
    Pair(950, "ca99de5e", 1009, "9d7accfc",
         cause="put `traits.XCD_SWIZZLE` (default False, set by the fp8 builder only) in front of the head-slow "
               "XCD remap in `_init_dualwave_thread_mapping` (kernels/attention/flash_attn_utils.py), so bf16 "
               "dense non-causal attention on gfx950 lost the remap",
         restored=("flash_attn_gfx950:noncausal",),
         restored_how="the remap for bf16 dense dualwave attention, non-causal, H % 8 == 0 (the registered shape "
                      "has H = 64): -8.0% TFLOP/s on MI355X at long sequences, restored by #1009. #1009 decides it "
                      "in the interface (`flydsl_flash_attn_func`, `dualwave_swp_xcd_swizzle=None` -> auto) and "
                      "passes `_xcd_swizzle` to the builder",
         wheel="0.3.1", wheel_why="the first wheel built after the merge (count 804 >= 779); the old replay gave "
                                  "the base 0.3.0 and its head failed to compile there"),
    Pair(930, "daee90e4", 1035, "5baf5b2c",
         cause="moved the kernels' raw `arith.maximumf`/`MaxNumFOp(..., fastmath=fm_fast)` onto `fx.maxnumf`, "
               "which (until #1035) dropped the ambient fastmath: the ops came out `fastmath<none>`",
         restored=("flash_attn_generic:causal_m128", "flash_attn_generic:causal_m256",
                   "flash_attn_generic:noncausal_m128", "flash_attn_gfx950:causal", "flash_attn_gfx950:noncausal",
                   "flash_attn_fp8_gfx950:causal", "flash_attn_fp8_gfx950:noncausal"),
         restored_how="`fast` back on the 16 `fx.maxnumf` sites of kernels/attention/flash_attn_utils.py, which every "
                      "registered flash-attention kernel is built from: +9.0% on MI355X bf16 non-causal at "
                      "S = 180,180. The paged-decode sites (22) inherit `contract` and the MLA sites (3) are pinned "
                      "to `contract`, inert for a max; the MoE sites (2) have no hint to inherit. So the fix "
                      "restored code in the attention kernels only",
         wheel="0.3.2.dev853+pre1035",
         wheel_why="the flydsl of the day: 0.3.2.dev853 (the first wheel built after the merge) already holds "
                   "#1035's `fx.maxnumf`, so it is that wheel with python/flydsl/expr/arith.py as it was at "
                   "daee90e4 (byte-identical to 5baf5b2c^1's), the only file of the package #1035 changed",
         library_fix=True),
    Pair(974, "772f0703", 1007, "4f527a27",
         cause="replaced the per-k-step A-fragment LDS reads in `mma_kloop` (kernels/gemm/preshuffle_gemm.py) with "
               "one whole-tile `fx.copy`, which leaves the scheduler no room to interleave them with the MFMAs",
         restored=("preshuffle_gemm:fp8_decode", "preshuffle_gemm:fp8_m256", "preshuffle_gemm:fp8_prefill",
                   "preshuffle_gemm:int8_prefill", "preshuffle_gemm:bf16_prefill",
                   "preshuffle_gemm:fp8_async_m256"),
         restored_how="the per-k-step reads, in every preshuffle GEMM (the registered ones whose code #1007's gate "
                      "shows changed back: 6 of 7, all but fp8_async_prefill): 3.3x on MI355X bf16 128x256x256 and "
                      "1.13x at 128x128x256; neutral (within 1%) at tile_k 64/128 and at 64x256x256. No registered "
                      "bf16 tile has tile_k 256 with tile_m 128, and the fix timed no fp8 or int8 shape",
         wheel="0.3.1", wheel_why="the first wheel built after the merge (count 804 >= 797)",
         answer="partly"),
)


def gate_report(fixes: Path, commit: str, wheel: str) -> dict | None:
    path = fixes / f"{commit}.wheel-{wheel}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def named(report: dict) -> dict[str, list[str]]:
    """The kernels whose machine code the gate said changed, with the targets ("machine code changed in N
    kernels: a (gfx942, gfx950); b (gfx950); ISA diffs in ...")."""
    note = next((n for n in report["notes"] if n.startswith("machine code changed")), "")
    if not note:
        return {}
    listed = note.split(": ", 1)[1].split("; ISA diffs")[0]
    found = {}
    for part in listed.split("; "):
        match = re.fullmatch(r"(.*) \((.*)\)", part)
        if match:
            found[match[1]] = match[2].split(", ")
    return found


def resources(report: dict, kernels: tuple[str, ...] | None = None) -> list[str]:
    return [f"{r['name']} {r['metric']} {r['base']:g} -> {r['head']:g} ({r['arch']})" for r in report["resources"]
            if kernels is None or r["name"] in kernels]


def selection(report: dict) -> str:
    note = next((n for n in report["notes"] if n.startswith("compile selection:")), "")
    return re.sub(r"^compile selection: ", "", note).split(", built from")[0].split(":")[0]


def wheels(report: dict) -> str:
    found = sorted({m[1] for n in report["notes"] if (m := re.match(r"(?:base|head) \w+: .*flydsl (\S+)", n))})
    return ", ".join(found)


def compile_seconds(report: dict) -> str:
    note = next((n for n in report["notes"] if n.startswith("compile:")), "")
    match = re.search(r"(\d+) s$", note)
    return match[1] if match else ""


def wheel_ab(commit: str, cache_a: Path, wheel_a: str, cache_b: Path, wheel_b: str) -> dict[str, list[str]]:
    """The kernels whose machine code differs between two wheels at one commit's kernels/ tree: the records
    of that tree in two compile caches (one per wheel), compared as the gate compares its two sides."""
    from flybench.cli.gate import _isa_diffs
    from flybench.compile.cache import entry_dir

    def records(cache: Path, wheel: str) -> list[dict]:
        found = []
        for path in (cache / "compile-cache").glob("*/*/*/record.json"):
            record = json.loads(path.read_text())
            source = record.get("source") or {}
            if Path(str(source.get("path", ""))).name.startswith(commit) and \
                    record.get("toolchain", {}).get("flydsl") == wheel:
                found.append({**record, "_dir": path.parent})
        return found

    a, b = records(cache_a, wheel_a), records(cache_b, wheel_b)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for record in (*a, *b):  # one cache that holds both sides' entries, as `_isa_diffs` reads one
            link = entry_dir(root, record["kernel"], record["arch"], record["key"])
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(record.pop("_dir"))
        return _isa_diffs(a, b, root, root / "diffs")


def verdict(restored: tuple[str, ...], changed: dict[str, list[str]]) -> str:
    hit = [k for k in restored if k in changed]
    return "yes" if len(hit) == len(restored) else "partly" if hit else "no"


def lineup(fixes: Path, repo: Path, ab: dict[str, dict[str, list[str]]]) -> list[dict]:
    rows = []
    for pair in PAIRS:
        date = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%cs", pair.regression_commit],
                              capture_output=True, text=True, check=True).stdout.strip()
        fix_date = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%cs", pair.fix_commit],
                                  capture_output=True, text=True, check=True).stdout.strip()
        report = gate_report(fixes, pair.regression_commit, pair.wheel)
        fix_reports = {path.name.split(".wheel-", 1)[1].removesuffix(".json"): json.loads(path.read_text())
                       for path in sorted(fixes.glob(f"{pair.fix_commit}.wheel-*.json"))}
        other = {path.name.split(".wheel-", 1)[1].removesuffix(".json"): json.loads(path.read_text())
                 for path in sorted(fixes.glob(f"{pair.regression_commit}.wheel-*.json"))
                 if not path.name.endswith(f".wheel-{pair.wheel}.json")}
        row = {"regression": pair.regression, "regression_commit": pair.regression_commit, "date": date,
               "fix": pair.fix, "fix_commit": pair.fix_commit, "fix_date": fix_date, "cause": pair.cause,
               "restored": list(pair.restored), "restored_how": pair.restored_how, "wheel": pair.wheel,
               "wheel_why": pair.wheel_why, "library_fix": pair.library_fix}
        if report is None:
            row["gate"] = None
        else:
            changed = named(report)
            row["gate"] = {"wheels": wheels(report), "selection": selection(report), "code_changed": changed,
                           "resources": resources(report), "exit": "pass" if report["summary"].get("regressions", 0)
                           == 0 else "fail", "compile_s": compile_seconds(report)}
            row["named"] = pair.answer or verdict(pair.restored, changed)
            row["restored_named"] = {k: changed.get(k, []) for k in pair.restored}
            row["restored_resources"] = resources(report, pair.restored)
        row["other_wheels"] = {w: {"code_changed": named(r), "selection": selection(r)} for w, r in other.items()}
        row["fix_gates"] = {w: {"code_changed": named(r), "selection": selection(r), "resources": resources(r)}
                            for w, r in fix_reports.items()}
        if pair.regression_commit in ab:
            row["fix_wheel_ab"] = ab[pair.regression_commit]
        rows.append(row)
    return rows


def _kernels(changed: dict[str, list[str]]) -> str:
    return "; ".join(f"{k} ({', '.join(a)})" for k, a in changed.items()) or "none"


def markdown(rows: list[dict], notes: dict[int, str]) -> str:
    lines = ["The gate's compile half (`flybench gate MERGE^1 MERGE --flydsl-repo CLONE --no-timing`, today's "
             "registry of 33 FlyDSL kernels, one flydsl wheel for both sides) on each FlyDSL pull request that a "
             "later fix names as the cause of a slowdown. Compiled on a 2-core CPU machine for gfx942 and gfx950; "
             "nothing here ran on AMD hardware. What the fixes restored, and how much, is FlyDSL's own "
             "measurement on MI355X, quoted from the fixes' commit messages.",
             "",
             "| regression | date | wheel (both sides) | gate named: machine code changed | fix | kernels the fix "
             "restored | named on the day? |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        gate = row["gate"]
        changed = _kernels(gate["code_changed"]) if gate else "not run"
        lines.append(f"| #{row['regression']} `{row['regression_commit']}` | {row['date']} | {row['wheel']} | "
                     f"{changed} | #{row['fix']} `{row['fix_commit']}` ({row['fix_date']}) | "
                     f"{', '.join(row['restored'])} | **{row.get('named', 'not run')}**: {notes.get(row['regression'], '')} |")
    for row in rows:
        gate = row["gate"]
        lines += ["", f"## #{row['regression']} -> #{row['fix']}", "",
                  f"- **What #{row['regression']} did:** {row['cause']}.",
                  f"- **What #{row['fix']} restored:** {row['restored_how']}.",
                  f"- **Wheel:** {row['wheel']}: {row['wheel_why']}."]
        if gate:
            lines += [f"- **The gate on #{row['regression']}:** selected {gate['selection']}; compiled in "
                      f"{gate['compile_s']} s; exit {gate['exit']} (machine-code and resource changes are reported, "
                      "never failed).",
                      f"- **Machine code changed:** {_kernels(gate['code_changed'])}.",
                      "- **Resource changes of the restored kernels:** "
                      + ("; ".join(row["restored_resources"]) or "none") + "."]
        for wheel, other in row["other_wheels"].items():
            lines.append(f"- **The same gate with wheel {wheel}:** machine code changed in "
                         f"{_kernels(other['code_changed'])}.")
        if "fix_wheel_ab" in row:
            lines.append(f"- **#{row['fix']}'s library change alone** (#{row['regression']}'s kernels compiled with the "
                         f"wheel before and after it): machine code changed in {_kernels(row['fix_wheel_ab'])}.")
        for wheel, fix in row["fix_gates"].items():
            lines.append(f"- **The gate on the fix #{row['fix']}** (wheel {wheel}): selected {fix['selection']}; "
                         f"machine code changed in {_kernels(fix['code_changed'])}.")
    return "\n".join(lines) + "\n"


NOTES = {
    950: "the gate named flash_attn_gfx950:noncausal, the kernel #1009 restored: its base has the remap's 64-bit "
         "division by the q-block count and its head does not (SALU 547 -> 418, branches 18 -> 15). The metrics "
         "read as an improvement: the loss is L2 locality across XCDs, which no resource count shows",
    930: "with the flydsl of the day the gate named all 7 flash-attention kernels #1035 restored (each target), "
         "with small resource moves (code +16 to +80 bytes, a few SALU/VALU); the ISA diffs hold the "
         "`v_max_f32 vN, vN, vN` a max without nnan adds. With 0.3.2.dev853 as published (it holds #1035) it names "
         "none of them",
    974: "the gate named the 6 preshuffle GEMMs whose code #1007 changed back (bf16_prefill VGPRs 186 -> 196 on "
         "gfx942, int8_prefill occupancy 3 -> 2 on gfx950), but FlyDSL measured the loss only at bf16 tiles "
         "128x256x256 and 128x128x256, which the registry does not hold, and found the registered tile_k 64/128 "
         "shapes neutral: the gate named the code, not a kernel shape that slowed",
}
"""One line per regression: why the answer is what it is (filled in from the reports)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.fix_lineup", description=__doc__.splitlines()[0])
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--fixes", type=Path, required=True, help="the gates' JSON reports")
    parser.add_argument("--ab", nargs=5, action="append", default=[],
                        metavar=("COMMIT", "CACHE_A", "WHEEL_A", "CACHE_B", "WHEEL_B"),
                        help="compare one commit's kernels compiled with two wheels (two gates' compile caches)")
    parser.add_argument("--out", type=Path, required=True, help="OUT.md and OUT.json are written")
    args = parser.parse_args(argv)
    ab = {commit: wheel_ab(commit, Path(ca), wa, Path(cb), wb) for commit, ca, wa, cb, wb in args.ab}
    rows = lineup(args.fixes, args.flydsl_repo, ab)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    text = markdown(rows, NOTES)
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
