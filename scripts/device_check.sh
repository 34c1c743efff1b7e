#!/usr/bin/env bash
# The GPU check of the registered path: one script, one GPU, under 8 minutes on an H200.
#
#   scripts/device_check.sh                       # Qwen3-8B's shape, 18,432 tokens a micro-batch
#   scripts/device_check.sh --shape qwen3-1.7b    # a card smaller than the registered box's
#
# Needs the project's dependencies: its .venv where `make install` ran, else the python3 on the
# PATH with the wheels of scripts/device_wheels.sh installed (the device machine: carry .whl).
# flash-attn and vLLM are optional: without them the check trains with SDPA and generates with
# the transformers engine, and the report says which ran. Writes everything under $OUT (default:
# a new temporary folder) and prints the JSON report last. CPU CI never runs it; its Python part
# runs on CPU in reduced mode in prover_assets_tests/test_device_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PYTHON" -c "import pydantic, yaml, torch, transformers, peft, accelerate" 2>"$OUT/imports.txt"; then
  echo "missing dependencies for $PYTHON ($(tail -1 "$OUT/imports.txt")): run" \
    "scripts/device_wheels.sh where pip can download, carry .whl and install it first" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.csv"
timeout 470 "$PYTHON" scripts/device_check.py --out "$OUT/check" "$@" 2>&1 | tee "$OUT/device_check.log"
echo "report: $OUT/check/report.json"
