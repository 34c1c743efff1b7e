#!/usr/bin/env bash
# The GPU check of the registered path: one script, one GPU, under 8 minutes on an H200.
#
#   scripts/device_check.sh                       # Qwen3-8B's shape, 18,432 tokens a micro-batch
#   scripts/device_check.sh --shape qwen3-1.7b    # a card smaller than the registered box's
#   scripts/device_check.sh --reduced             # CPU, the tiny model (the test)
#
# Needs the project's dependencies: its .venv where `make install` ran, else the python3 on the
# PATH with the wheels of scripts/device_wheels.py installed (the device machine: carry .whl).
# flash-attn and vLLM are optional: without them the check trains with SDPA and generates with
# the transformers engine, and the report says which ran. The models (16 GB each at 8B: the
# base, the export) go to a scratch folder ($DEVICE_CHECK_SCRATCH, else the temporary folder),
# removed at the end; $OUT (default: a
# new temporary folder) gets only the report, the log and the GPU's line, small enough to come
# back from a device call. Prints the JSON report last. CPU CI never runs it; its Python part
# runs on CPU in reduced mode in prover_assets_tests/test_device_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
# outside the tree: a `dagster dev` or a test running in the checkout sees none of it
WORK="$(mktemp -d -p "${DEVICE_CHECK_SCRATCH:-${TMPDIR:-/tmp}}" device-check.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PYTHON" -c "import pydantic, yaml, torch, transformers, peft, accelerate" 2>"$OUT/imports.txt"; then
  echo "the dependencies do not import for $PYTHON ($(tail -1 "$OUT/imports.txt")): run" \
    "scripts/device_wheels.py where pip can download, carry .whl and install it first" >&2
  exit 2
fi
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.csv"
fi
status=0
timeout 470 "$PYTHON" scripts/device_check.py --out "$WORK/check" "$@" 2>&1 \
  | tee "$OUT/device_check.log" || status=$?
[ -f "$WORK/check/report.json" ] && cp "$WORK/check/report.json" "$OUT/report.json"
echo "report: $OUT/report.json (exit $status)"
exit "$status"
