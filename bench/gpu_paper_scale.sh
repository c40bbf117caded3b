#!/usr/bin/env bash
# Paper-scale records on one GPU in a fixed time (see bench/gpu_paper_scale.py).
#   bash bench/gpu_paper_scale.sh OUT [SECONDS]     # default 540 s; records in OUT/results/ladder/paper
#   EXPERIMENT=attention bash bench/gpu_paper_scale.sh OUT [SECONDS]
#                                                   # the paper's attention suite (float64), records
#                                                   # in OUT/results/attention/paper
# No part starts after SECONDS; a hard stop 60 s later ends a part that overruns its estimate
# (its batch is lost, every finished one is recorded). Run from the repository root.
set -euo pipefail
out=${1:?usage: gpu_paper_scale.sh OUT [SECONDS]}
limit=${2:-540}
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
[ -x "$python" ] || python=python3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
rc=0
timeout --signal=TERM --kill-after=10 $((limit + 60)) \
  "$python" "$here/bench/gpu_paper_scale.py" "$out" --time-limit "$limit" --device "${DEVICE:-cuda}" \
    --experiment "${EXPERIMENT:-ladder}" \
  || rc=$?
if [ "$rc" -eq 124 ]; then
  echo "hard stop after $((limit + 60)) s: the part in flight is lost, finished parts are recorded"
  rc=0
fi
ls -l "$out/results/${EXPERIMENT:-ladder}/paper" 2>/dev/null || true
exit "$rc"
