"""The device check's Python part, in its reduced mode on CPU: the same steps the GPU runs."""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from prover_assets.sft.memory import GIB
from prover_assets_tests.test_device_wheels import device_wheels

ROOT = Path(__file__).parents[1]


@pytest.mark.slow
def test_the_reduced_device_check_trains_exports_in_bf16_and_generates(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "device_check.sh"), "--reduced", "--steps", "2"],
        env={
            **os.environ,
            "OUT": str(tmp_path / "out"),
            "PYTHON": sys.executable,
            "DEVICE_CHECK_SCRATCH": str(scratch),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # only what a device call brings back; the models' scratch is gone
    out = tmp_path / "out"
    assert {path.name for path in out.iterdir()} <= {
        "report.json",
        "device_check.log",
        "imports.txt",
        "gpu.csv",
    }
    assert list(scratch.iterdir()) == []
    report = json.loads((out / "report.json").read_text())
    assert report["mode"].startswith("reduced")
    assert report["training"]["optimizer_steps"] == 2
    assert report["training"]["attention"] == "sdpa"  # CPU: no flash-attention
    assert report["training"]["peak_memory_gib_measured"] is None  # torch measures GPUs only
    if shutil.which("nvidia-smi") is None:  # no GPU tool: no reading
        assert report["training"]["peak_gpu_gib_device_reading"] is None
    assert report["training"]["attention_as_registered"] is False
    export = report["export"]
    assert export["dtype"] == "bfloat16"
    assert export["merged_on"] == "cpu"  # no GPU: the merge on the host, as modelled there
    assert export["host_peak_gib_modelled"] * GIB == 4 * export["parameters"]
    assert export["host_peak_gib_measured"] > 0
    assert export["merge_max_abs_diff"] <= export["merge_tolerance"]
    assert 0 < export["cast_drift"] <= export["cast_drift_allowance"]
    assert report["generation"]["engine"] == "transformers"  # no vLLM here
    assert report["generation"]["samples"] == 2
    assert report["generation"]["completion_tokens"] > 0
    # what ran, and what scripts/device_wheels.py carries from it
    distributions = report["distributions"]
    for name in ("transformers", "peft", "pydantic", "huggingface-hub", "torch"):
        assert distributions[name] == importlib.metadata.version(name)
    assert "dagster" not in distributions  # the domain modules only
    carried = device_wheels.carried(distributions)
    assert {"transformers", "huggingface-hub", "pydantic-core"} <= set(carried)
    requirements = {name: device_wheels.requirements_of(name) for name in carried}
    assert device_wheels.unmet(carried, device_wheels.FROM_IMAGE, requirements) == []
