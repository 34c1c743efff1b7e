"""The one place that assembles the asset graph, from the run config the user launches with.

The graph's shape (evaluation sets, caps, rounds) comes from the config file named by
PROVER_ASSETS_CONFIG (default: configs/p2.yaml, the registered experiment); the same file is
the run config of `dagster job launch -c`. Loading imports no torch or vLLM.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import dagster as dg

from prover_assets.assets.demo import demo_assets
from prover_assets.assets.eta import eta_assets
from prover_assets.assets.generation import generation_assets
from prover_assets.assets.problems import problem_assets
from prover_assets.assets.report import report_assets
from prover_assets.assets.sft import sft_assets
from prover_assets.assets.verification import verification_assets
from prover_assets.checks.loop import loop_checks
from prover_assets.checks.problems import problem_checks
from prover_assets.checks.sft import sft_checks
from prover_assets.config import RunConfig, is_placeholder, load_run_config
from prover_assets.jobs import build_jobs
from prover_assets.resources import build_resources, launch_validation
from prover_assets.sensors import reaper_sensor

__all__ = ["CONFIG_ENV", "DEFAULT_CONFIG", "build_definitions", "config_path", "defs"]

CONFIG_ENV = "PROVER_ASSETS_CONFIG"
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "p2.yaml"


log = logging.getLogger(__name__)


def config_path() -> Path:
    """The config file the graph is built from (`PROVER_ASSETS_CONFIG`, else configs/p2.yaml)."""
    return Path(os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)


def _warn_of_placeholders(config: RunConfig) -> None:
    if config.placeholders:
        log.warning(
            "%s: %d placeholder values are still to be filled in before any job can launch: %s",
            config.source,
            len(config.placeholders),
            ", ".join(config.placeholders),
        )


def _data_root(value: str) -> Path | None:
    return None if is_placeholder(value) else Path(value).expanduser().resolve()


def build_definitions(path: str | Path) -> dg.Definitions:
    """The Dagster definitions (assets, checks, jobs, resources, sensor) for the config file at
    `path`."""
    config = load_run_config(path)
    spec = config.experiment
    resources = build_resources(config)
    _warn_of_placeholders(config)
    return dg.Definitions(
        assets=[
            *problem_assets(spec),
            *generation_assets(spec),
            *verification_assets(spec),
            *sft_assets(spec),
            *report_assets(spec),
            *demo_assets(spec),
            *eta_assets(spec),
        ],
        asset_checks=[*problem_checks(spec), *loop_checks(spec), *sft_checks(spec)],
        jobs=build_jobs(launch_validation(resources), unlaunchable=list(config.placeholders)),
        # One process per run, not per step: checks are many and light, and a step process costs
        # 2 to 3 s on a small machine; the heavy work already runs in its own children (vLLM,
        # the trainer) or worker pools (Lean REPLs), and pool `heavy` serialises it either way.
        executor=dg.in_process_executor,
        sensors=[reaper_sensor(_data_root(spec.data_root))],
        resources=resources,
    )


defs = build_definitions(config_path())
