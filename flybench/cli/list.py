"""`flybench list`: the workload catalog and the providers, with what runs here."""

from __future__ import annotations

import argparse

from flybench import hardware
from flybench.selection import check_shape_set, choices
from flybench.workloads import WORKLOADS, get_workload


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "list", help="list workload cases and providers",
        description="List each workload's cases in a shape set and every provider, with whether it runs on this "
                    "machine and, where it does not, why and how to make it. Exit status: 0, 2 bad input (an "
                    "unknown workload or shape set).")
    parser.add_argument("--set", dest="shape_set", default="quick", help="shape set: tiny, quick or full")
    parser.add_argument("--workload", "-w", action="append", help="only this workload (repeatable)")
    return parser


def main(args: argparse.Namespace) -> int:
    check_shape_set(args.shape_set)
    names = args.workload or list(WORKLOADS)
    for name in names:
        workload = get_workload(name)
        print(f"{name}: {workload.description}")
        for case in workload.cases(args.shape_set):
            print(f"  {case.name:48s} {case.model}")
    found = choices(hardware.detect(), names)
    widths = [max(len(getattr(c, field)) for c in found) for field in ("workload", "provider", "dtype")]
    for choice in found:
        state = "runs here" if choice.reason is None else f"unavailable: {choice.reason}"
        print(f"{choice.workload:{widths[0]}s} {choice.provider:{widths[1]}s} {choice.dtype:{widths[2]}s} {state}")
    return 0
