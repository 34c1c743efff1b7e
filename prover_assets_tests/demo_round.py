"""The demo loop (the positive control), job by job as a user launches them, with SFT training
stopped (SIGTERM) half-way and resumed: run once per test process by `conftest.finished_round`,
so that the modules that read its finished outputs (test_demo.py, test_demo_gates.py: one
process group, `conftest.SHARED_PROCESS_GROUPS`) share one run of it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import dagster as dg
import yaml

from prover_assets.definitions import build_definitions
from prover_assets_tests.support import dagster_home, full_demo_run_config

__all__ = ["run_demo_round", "run_job"]


def trainer_pids(data_root: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "prover_assets.sft.trainer" in cmdline and str(data_root) in cmdline:
            pids.append(int(proc.name))
    return pids


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def run_job(defs: dg.Definitions, name: str, instance: dg.DagsterInstance):
    result = defs.resolve_job_def(name).execute_in_process(instance=instance, raise_on_error=False)
    failed = [e for e in result.get_asset_check_evaluations() if not e.passed]
    return result, failed


def stop_training_midway(data_root: Path, timeout: float = 1200) -> None:
    """SIGTERM the trainer once it has trained two micro-steps."""
    order = data_root / "sft_checkpoint" / "data_order.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = trainer_pids(data_root)
        if pids and lines(order) >= 2:
            for pid in pids:
                os.killpg(pid, signal.SIGTERM)
            return
        time.sleep(0.02)
    raise TimeoutError("the trainer never started training")


def run_demo_round(tmp: Path) -> dict:
    """The demo's jobs in `tmp` (its data root, config and Dagster home), SFT stopped and
    resumed: each job's outcome, and where it all is."""
    data_root = tmp / "data"
    raw = full_demo_run_config(data_root)
    config = tmp / "demo.yaml"
    config.write_text(yaml.safe_dump(raw))
    home = dagster_home(tmp / "dagster_home")
    defs = build_definitions(config)
    outcomes = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for name in ("preflight", "baseline", "pool_round"):
            outcomes[name] = run_job(defs, name, instance)
        stopped: dict = {}
        worker = threading.Thread(target=lambda: stopped.update(run=run_job(defs, "sft", instance)))
        worker.start()
        stop_training_midway(data_root)
        worker.join(timeout=1800)
        outcomes["sft stopped"] = stopped["run"]
        summary = json.loads((data_root / "sft_checkpoint" / "summary.json").read_text())
        for name in ("sft", "candidate_eval", "report"):
            outcomes[name] = run_job(defs, name, instance)
    return {
        "root": data_root,
        "raw": raw,
        "config": config,
        "home": home,
        "outcomes": outcomes,
        "stopped_summary": summary,
    }
