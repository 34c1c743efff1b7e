"""The preflight's balance line: the Lean workers a host holds and which side bounds each step."""

import math
from pathlib import Path

import yaml

from prover_assets.config import parse_run_config
from prover_assets.preflight.balance import balance_check
from prover_assets.preflight.model import CheckStatus
from prover_assets.verify.sizing import HostShape
from prover_assets_tests.factories import preflight_config

P2 = Path(__file__).parents[2] / "configs/p2.yaml"


def test_the_registered_config_on_an_8_gpu_96_core_1_tb_box_is_bound_by_its_gpus():
    config = parse_run_config(yaml.safe_load(P2.read_text()), str(P2))
    check = balance_check(config, {}, HostShape(cores=96, memory_mb=1024 * 1024.0), gpus=8)
    # Workers: 96 cores - 18 reserved = 78; memory (0.9 x 1 TiB - 56 GiB reserved - 5 GiB of
    # shared .oleans) / 8 GiB ceiling = 107, less the spare: 106. Pool round 0 by hand from the
    # priors: 2000 problems x 8 samples; generation 16000 x 8000 tokens / (3000 tok/s x 8
    # engines) + 180 s start-up; verification 16000 x 0.8 with code x 3.1 s x 8 / 78 workers
    # + 120 s.
    generate_h = (16000 * 8000 / (3000 * 8) + 180) / 3600
    verify_h = (16000 * 0.8 * 3.1 * 8 / 78 + 120) / 3600
    balancing = math.ceil(78 * verify_h / generate_h)
    assert check.status == CheckStatus.PASSED
    assert check.measured.startswith(
        "78 workers (auto: 78 by cores, 106 by memory; bound by cores) on 96 cores and 1024 GiB"
    )
    assert (
        f"pool round 0: GPU generation bounds it, {generate_h / verify_h:.1f}x the other side "
        f"(generate {generate_h:.2f} h, verify {verify_h:.2f} h at 78 workers); {balancing} "
        "workers would balance"
    ) in check.measured
    assert balancing == 60


def test_measured_smoke_rates_replace_the_priors_and_are_named_so(tmp_path):
    config = preflight_config(tmp_path / "data")
    figures = {"tokens_per_s": 50.0, "verify_s_per_code_sample": 0.2}
    check = balance_check(config, figures, HostShape(cores=2, memory_mb=24 * 1024.0))
    assert "tokens_per_s 50 (preflight)" in check.measured
    assert "verify_s_per_code_sample 0.2 (preflight)" in check.measured
    assert check.measured.startswith("2 workers (pinned in the config)")
