#!/usr/bin/env bash
# flybench bisect on a GPU over a short chain of this repository's commits that holds one planted slowdown.
#
# A clone of SOURCE (a repository or bundle holding main) gets COMMITS commits on top of main; commit
# PLANT_AT adds a calibrated torch.cuda._sleep spin after every case's call in flybench/measure/case.py
# (inside the timed call, graph-captured with it), and every later commit keeps it. `flybench bisect`
# then searches the chain for SERIES with an asv run per probed commit, and must name commit PLANT_AT.
#
#   studies/bisect_chain.sh SOURCE [SERIES] [SPIN_CYCLES]
#   studies/bisect_chain.sh . 'diffusion_attention.Quick.track_time(llama3-8b-b8-ctx4k-d32-p64-bidir, triton, bf16)'
set -euo pipefail
source_repo=$(cd "${1:?a repository or bundle holding main}" 2>/dev/null && pwd || echo "$1")
series=${2:-'diffusion_attention.Quick.track_time(llama3-8b-b8-ctx4k-d32-p64-bidir, triton, bf16)'}
spin=${3:-6000}
commits=${COMMITS:-8}
plant_at=${PLANT_AT:-5}
work=${WORK:-/tmp/flybench-chain}

rm -rf "$work"
git clone -q --branch main "$source_repo" "$work"
cd "$work"
git config user.name flybench-study
git config user.email study@flybench.invalid
good=$(git rev-parse HEAD)
for i in $(seq "$commits"); do
  if [ "$i" = "$plant_at" ]; then
    python3 - "$spin" <<'EOF'
import sys
from pathlib import Path

path = Path("flybench/measure/case.py")
line = "    runner = provider.build(case, dtype, inputs, device)\n"
text = path.read_text()
assert line in text, "the line the plant follows has moved"
path.write_text(text.replace(line, line + (
    "    built = runner\n"
    "    def runner():  # planted slowdown: a spin after the call\n"
    "        import torch\n"
    "        out = built()\n"
    f"        torch.cuda._sleep({int(sys.argv[1])})\n"
    "        return out\n")))
EOF
  fi
  echo "chain commit $i" >> CHAIN.txt
  git add -A
  git commit -qm "chain commit $i$([ "$i" = "$plant_at" ] && echo ' (planted slowdown)')"
done
bad=$(git rev-parse HEAD)
echo "chain: $good..$bad; planted in commit $plant_at of $commits"
PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" python3 -m flybench bisect "$series" "$good" "$bad" --subject flybench \
  --format markdown
