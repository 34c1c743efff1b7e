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

from prover_assets.assets.graph import graph_assets
from prover_assets.assets.keys import Schedule, iteration_partitions, schedule_of
from prover_assets.checks.graph import all_checks
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


def _executor(schedule: Schedule) -> dg.ExecutorDefinition:
    """Exclusive: one process per run, not per step (checks are many and light, and a step
    process costs 2 to 3 s on a small machine; pool `heavy` serialises the heavy work either
    way). Overlapped: a process per step, so that a GPU step and a Lean step run at once (e.g.
    verifying miniF2F while generating MOBench); the pools keep one of each at a time."""
    return dg.multiprocess_executor if schedule.overlapped else dg.in_process_executor


def build_definitions(path: str | Path) -> dg.Definitions:
    """The Dagster definitions (assets, checks, jobs, resources, sensor) for the config file at
    `path`."""
    config = load_run_config(path)
    spec = config.experiment
    schedule = schedule_of(config.gpu.schedule)
    resources = build_resources(config)
    _warn_of_placeholders(config)
    return dg.Definitions(
        assets=graph_assets(spec, schedule),
        asset_checks=all_checks(spec),
        jobs=build_jobs(
            lambda job: launch_validation(resources, job),
            unlaunchable=list(config.placeholders),
            iterations=iteration_partitions(spec.iterations),
        ),
        executor=_executor(schedule),
        sensors=[reaper_sensor(_data_root(spec.data_root))],
        resources=resources,
    )


defs = build_definitions(config_path())
