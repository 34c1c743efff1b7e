"""Shared fixtures: run configs pointed at temporary data roots."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"


def demo_run_config(data_root: Path, **spec_overrides) -> dict:
    """The demo config as a run-config dict, writing under `data_root`."""
    raw = yaml.safe_load((CONFIGS / "demo.yaml").read_text())
    spec = raw["resources"]["experiment"]["config"]["spec"]
    spec["data_root"] = str(data_root)
    spec.update(spec_overrides)
    return raw


@pytest.fixture
def demo_config_file(tmp_path) -> Path:
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(demo_run_config(tmp_path / "data")))
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny Qwen3-architecture model and tokenizer, built once per test session."""
    from prover_assets.generation.tiny_model import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model", hidden_size=64, layers=2, vocab_size=1024
    )
