#!/usr/bin/env bash
# The gate's targets on one GPU (docs/gate.md, "The gate's targets"): the study's heads gated as the pull-request
# job gates them (`--config .github/flybench-pr.toml --no-compile`, no filters), each with its wall time.
#
#   studies/gate_targets.sh OUT [comment|retune|aa ...]
#
# comment: a comment inside a Triton kernel, with a cold compile cache; retune: the sm_90 bf16 MoE buckets 2 and 3;
# aa: a docs-only head with --all-cases, the whole quick suite of every provider that runs here (A/A).
# Each gate's terminal report, JSON and markdown go to OUT, with a line of wall times in OUT/times.txt.
set -u
out=$1
shift
mkdir -p "$out"
subject=${SUBJECT:-/tmp/flybench-gate-subject}
[ -d "$subject" ] || python3 -m studies.gate_study prepare "$subject" > /dev/null
for head in "$@"; do
    extra=()
    case $head in
        comment) export FLYBENCH_GATE_CACHE=$(mktemp -d) ;;  # cold: nothing compiled before
        aa) extra=(--all-cases --budget-minutes "${AA_BUDGET:-9}") ;;
    esac
    begun=$(date +%s.%N)
    python3 -m flybench gate base "$head" --repo "$subject" --config .github/flybench-pr.toml --no-compile \
        --workdir "$(mktemp -d)/work" --json "$out/$head.json" --markdown "$out/$head.md" "${extra[@]}" \
        > "$out/$head.txt" 2> "$out/$head.err"
    status=$?
    echo "$head: exit $status, $(python3 -c "import time; print(f'{time.time() - $begun:.0f}')") s end to end" \
        | tee -a "$out/times.txt"
done
