#!/usr/bin/env bash
# The gate's targets on one GPU (docs/gate.md, "The gate's targets"): the study's heads gated as the pull-request
# job gates them (`--config .github/flybench-pr.toml --no-compile`, no filters), each with its wall time.
#
#   studies/gate_targets.sh OUT [comment|retune|aa ...]
#
# comment: a comment inside a Triton kernel; retune: the sm_90 bf16 MoE buckets 2 and 3 (RETUNE_BUDGET minutes,
# default 60); aa: a docs-only head with --all-cases, the whole quick suite of every provider that runs here (A/A).
# The heads share one compile cache, empty at the start: the first gate of a head runs cold, a second one warm.
# Each gate's terminal report, JSON and markdown go to OUT (a second gate of a head as HEAD-2.*), with a line of
# wall times in OUT/times.txt.
set -u
out=$1
shift
mkdir -p "$out"
subject=${SUBJECT:-/tmp/flybench-gate-subject}
[ -d "$subject" ] || python3 -m studies.gate_study prepare "$subject" > /dev/null
export FLYBENCH_GATE_CACHE=$(mktemp -d)
for head in "$@"; do
    extra=()
    case $head in
        retune) extra=(--budget-minutes "${RETUNE_BUDGET:-60}") ;;
        aa) extra=(--all-cases --budget-minutes "${AA_BUDGET:-9}") ;;
    esac
    name=$head
    [ -e "$out/$head.json" ] && name=$head-2
    begun=$(date +%s.%N)
    python3 -m flybench gate base "$head" --repo "$subject" --config .github/flybench-pr.toml --no-compile \
        --workdir "$(mktemp -d)/work" --json "$out/$name.json" --markdown "$out/$name.md" "${extra[@]}" \
        > "$out/$name.txt" 2> "$out/$name.err"
    status=$?
    echo "$name: exit $status, $(python3 -c "import time; print(f'{time.time() - $begun:.0f}')") s end to end" \
        | tee -a "$out/times.txt"
done
