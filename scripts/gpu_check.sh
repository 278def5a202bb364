#!/usr/bin/env bash
# GPU check of the scaled agent RL path (scripts/gpu_check.py): random ~1.2B model, a few GRPO
# steps with the transformers sampler and with colocated vLLM against a served random
# simulator; prints rollout tokens/s, step time and peak memory. No network needed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: no CUDA device visible; run this on a GPU machine" >&2
  exit 2
fi
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" exec python scripts/gpu_check.py "$@"
