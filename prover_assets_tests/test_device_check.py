"""The device check's Python part, in its reduced mode on CPU: the same steps the GPU runs."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from prover_assets.sft.memory import GIB

SCRIPT = Path(__file__).parents[1] / "scripts" / "device_check.py"


@pytest.mark.slow
def test_the_reduced_device_check_trains_exports_in_bf16_and_generates(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--reduced", "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
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
