#!/usr/bin/env bash
# The GPU check of generation, in minutes: real vLLM on the tiny Qwen3 model, one engine child
# and (with two GPUs or more) two, their results equal key by key; the served model named in
# ready.json and checked; seeds reproduced across processes; vLLM against transformers on
# first-token logprobs; a real `vllm serve` answering with token ids.
#
#   scripts/generation_check.sh
#
# Needs the project installed with vLLM (pip install -e '.[gpu]' on the GPU box). CPU CI never
# runs it: there the same paths run against the SIMULATED vllm (prover_assets_tests/doubles).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3

nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
"$PYTHON" -c "import torch, vllm; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| vllm', vllm.__version__, '| GPUs', torch.cuda.device_count())"
timeout 900 "$PYTHON" -m pytest -m gpu -q -rs prover_assets_tests/generation/test_engines.py prover_assets_tests/generation/test_openai_engine.py
