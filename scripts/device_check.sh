#!/usr/bin/env bash
# The GPU check of training and export at scale: one script, one GPU, under 8 minutes.
#
#   scripts/device_check.sh                 # Qwen3-1.7B's shape, 18,432 tokens a micro-batch
#   scripts/device_check.sh --shape qwen3-8b
#
# Needs the project installed with a CUDA torch (make install on the GPU box; flash-attn
# optional: without it the check trains with SDPA and says so). Writes everything under $OUT
# (default: a new temporary folder) and prints the JSON report last. CPU CI never runs it; its
# Python part runs on CPU in reduced mode in prover_assets_tests/test_device_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.csv"
"$PYTHON" -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| transformers', transformers.__version__, '| peft', peft.__version__)" | tee "$OUT/versions.txt"
"$PYTHON" -c "import importlib.util as u; print('flash_attn installed:', u.find_spec('flash_attn') is not None)" | tee -a "$OUT/versions.txt"
timeout 470 "$PYTHON" scripts/device_check.py --out "$OUT/check" "$@" 2>&1 | tee "$OUT/device_check.log"
echo "report: $OUT/check/report.json"
