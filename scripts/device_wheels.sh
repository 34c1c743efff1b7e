#!/usr/bin/env bash
# The wheels the device check needs beyond the device machine's image ('cuda': Python 3.12,
# torch, transformers, peft, accelerate, safetensors, tokenizers, numpy, pyyaml, psutil are
# there; pydantic is not), downloaded here into .whl/ (ignored by git) for `device run` to carry:
#
#   scripts/device_wheels.sh            # then carry .whl and start the command with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
#
# The versions are this checkout's own (its .venv), so the GPU runs the code the CPU tests ran
# against: pydantic and its three dependencies, and transformers and peft (the image's may be
# older than what the project is tested with). flash-attn and vLLM are not carried: each wheel
# is hundreds of MB against the 64 MiB a call may carry; without them the check trains with SDPA
# and generates with the transformers engine, and its report says so.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
WANTED=(pydantic pydantic-core annotated-types typing-inspection transformers peft)
mkdir -p .whl
for name in "${WANTED[@]}"; do
  version=$("$PYTHON" -c "import importlib.metadata as m; print(m.version('$name'))")
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$name==$version"
done
ls -l .whl
du -sh .whl
