"""Shared fixtures: run configs pointed at temporary data roots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
# The test package is not installed (the distribution is the product): processes the tests start
# (the REPL double, `dagster dev`) find it through the checkout, whatever their working directory.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def full_demo_run_config(data_root: Path, name: str = "demo.yaml") -> dict:
    """A demo config (the positive control, or `demo-null.yaml`) exactly as shipped, as a
    run-config dict writing under `data_root`."""
    raw = yaml.safe_load((CONFIGS / name).read_text())
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = str(data_root)
    return raw


def demo_run_config(data_root: Path, **spec_overrides) -> dict:
    """The demo config at the size of the tests of its mechanics (jobs, checks, the UI, kills):
    a quarter of its problems and pool, a shorter format tuning, and a simulated verifier that
    accepts a share of proofs by their code (so that a short-tuned model still finds proofs to
    train on). Only the control tests run it whole (`full_demo_run_config`): the size that
    detects the planted effect."""
    raw = full_demo_run_config(data_root)
    raw["resources"]["lean"]["config"]["settings"]["simulated"].update(
        rule="seeded_share", accept_share=0.5, seed=7
    )
    spec = raw["resources"]["experiment"]["config"]["spec"]
    spec["eval_sets"]["minif2f"]["limit"] = 6
    spec["pool"].update(candidates=24, size=12)
    spec["demo"]["finetune_steps"] = 200
    spec["training"]["epochs"] = 2
    spec.update(spec_overrides)
    return raw


def dagster_home(folder: Path) -> Path:
    """A DAGSTER_HOME at `folder` with the project's dagster.yaml, as `make ui` sets one up."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    return folder


@pytest.fixture(scope="session", autouse=True)
def isolated_dagster_home(tmp_path_factory):
    """Tests never touch the user's instance (`make test` exports .dagster_home/, which a
    fresh clone does not have yet): every test process sees a temporary one."""
    import os

    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(dagster_home(tmp_path_factory.mktemp("dagster_home")))
    yield
    if previous is None:
        del os.environ["DAGSTER_HOME"]
    else:
        os.environ["DAGSTER_HOME"] = previous


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


def gpu_missing() -> str | None:
    """Why the `gpu` tests cannot run here, or None when they can."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (pip install '.[gpu]' in a CUDA environment)"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU is visible"
    return None


LEAN_WORKSPACE_ENV = "PROVER_LEAN_WORKSPACE"


def lean_workspace() -> Path | None:
    """The Lean + Mathlib workspace (with the REPL built) named by $PROVER_LEAN_WORKSPACE."""
    import os

    value = os.environ.get(LEAN_WORKSPACE_ENV)
    return Path(value) if value else None


@pytest.fixture(scope="session")
def demo_webserver(tmp_path_factory):
    """`dagster dev` on the demo config, shared by the Launchpad and browser tests (the later
    ones reuse what the earlier ones materialized, as a user's relaunch does), after a passing
    preflight for it."""
    from prover_assets.config import parse_run_config
    from prover_assets.preflight import run_preflight
    from prover_assets_tests.processes import dagster_dev

    tmp = tmp_path_factory.mktemp("webserver")
    raw = demo_run_config(tmp / "data")
    report, _ = run_preflight(parse_run_config(raw, "the webserver's config"))
    assert report.passed, report.markdown()  # heavy jobs launch only after one
    with dagster_dev(tmp, raw) as url:
        yield {"url": url, "data": tmp / "data"}
