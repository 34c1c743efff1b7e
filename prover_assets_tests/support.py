"""What the tests share beside their fixtures: the checkout's paths, the shipped demo configs
at the tests' sizes, the session's store of format tunings, a DAGSTER_HOME like `make ui`'s,
and why the `gpu` and `lean` tests cannot run here. `conftest.py` holds only pytest's hooks
and fixtures, and imports from here; nothing imports `conftest.py`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"

# A folder every test process of one session shares (the workers of `pytest -n` inherit it from
# the process that starts them): the demos' format-tuned models, tuned once per session. Set it
# yourself to keep them from one session to the next.
SHARED_ENV = "PROVER_TEST_SHARED"
# The format tunings of the tests' demo configs, made by `scripts/demo_tunings.py` with the
# product's own tuning and keyed by their recipe: a session starts with them, so no loop tunes
# unless the tuning's code, model, examples or settings changed (then the first loop tunes, as
# a user's first `make demo` does, and test_demo says the shipped entry is stale).
SHIPPED_TUNINGS = ROOT / "prover_assets_tests" / "data" / "demo-tunings"


def seed_shared_tunings(shared: Path) -> None:
    """Copy each shipped tuning entry missing from `shared` into it, whole or not at all."""
    from prover_assets.records.store import OutputExistsError, publish_folder

    for entry in sorted(SHIPPED_TUNINGS.glob("*/")):
        if (shared / entry.name).exists():
            continue
        # another session sharing the folder may land the same bytes first
        with contextlib.suppress(OutputExistsError), publish_folder(shared / entry.name) as staging:
            shutil.copytree(entry, staging, dirs_exist_ok=True)


def session_tunings() -> Path:
    """The session's store of format-tuned demo models (`spec.demo.shared_tunings`)."""
    return Path(os.environ[SHARED_ENV]) / "demo-tunings"


def shipped_tuning_state(data_root: Path) -> str:
    """Where the data root's demo model came from: "shipped" (a copy of a shipped tuning),
    "stale" (tuned now: a shipped entry has its statements and settings but another recipe, so
    the tuning's code, its untuned model or the libraries that build it changed), or "missing"
    (tuned now, and no shipped entry is of its statements and settings)."""
    from prover_assets.demo.shared_tunings import read_tuning

    manifest = json.loads((data_root / "demo_base_model" / "manifest.json").read_text())
    entry = Path(manifest["shared_tuning"]["entry"])
    shipped = {p.name: p for p in SHIPPED_TUNINGS.glob("*/")}
    if entry.name in shipped:
        return "shipped"

    def identity(folder: Path) -> tuple:
        recorded = read_tuning(folder)
        settings = {k: v for k, v in recorded.settings.items() if k != "recipe"}
        return recorded.inputs, settings

    return "stale" if identity(entry) in map(identity, shipped.values()) else "missing"


def assert_tuning_shipped(data_root: Path) -> None:
    """The data root's demo model was copied from a shipped tuning; a stale one (the suite tuned
    it again, slower, as a user's `make demo` would) is a warning, since a library's release can
    change the untuned model; a config no shipped entry covers fails."""
    state = shipped_tuning_state(data_root)
    if state == "stale":
        warnings.warn(STALE_TUNING, stacklevel=2)
    assert state != "missing", (
        "no shipped tuning for this config: add it to scripts/demo_tunings.py"
    )


STALE_TUNING = "the shipped format tuning is stale (its recipe changed): run `make demo-tunings`"


def shipped_config(data_root: Path, name: str) -> dict:
    """A config of configs/ exactly as shipped, as a run-config dict writing under `data_root`;
    a demo's tuned model shared with the session's other loops, not with the user's."""
    raw = yaml.safe_load((CONFIGS / name).read_text())
    spec = raw["resources"]["experiment"]["config"]["spec"]
    spec["data_root"] = str(data_root)
    if "demo" in spec:
        spec["demo"]["shared_tunings"] = str(session_tunings())
    return raw


def full_demo_run_config(data_root: Path, name: str = "demo.yaml") -> dict:
    """A demo config (the positive control, or `demo-null.yaml`) exactly as shipped, as a
    run-config dict writing under `data_root`."""
    return shipped_config(data_root, name)


def demo_run_config(data_root: Path, **spec_overrides) -> dict:
    """The demo config at the size of the tests of its mechanics (jobs, checks, the UI, kills):
    `mechanics_size` of configs/demo.yaml. Only the control tests run it whole
    (`full_demo_run_config`): the size that detects the planted effect."""
    return mechanics_size(shipped_config(data_root, "demo.yaml"), **spec_overrides)


def mechanics_size(raw: dict, *, planted_rule: bool = False, **spec_overrides) -> dict:
    """A shipped demo config at the size of the tests of its mechanics: a quarter of its problems
    and pool (its format tuning, the same for every such test, shipped or tuned once a session),
    two epochs, and a simulated verifier that accepts half of the proofs by their
    code (so that a short-tuned model still finds proofs to train on), or with `planted_rule`
    the config's own rule (a later model finds proofs an earlier one did not)."""
    if not planted_rule:
        raw["resources"]["lean"]["config"]["settings"]["simulated"].update(
            rule="seeded_share", accept_share=0.5, seed=7
        )
    spec = raw["resources"]["experiment"]["config"]["spec"]
    spec["eval_sets"]["minif2f"]["limit"] = 6
    spec["pool"].update(candidates=24, size=12)
    spec["training"]["epochs"] = 2
    spec.update(spec_overrides)
    return raw


def dagster_home(folder: Path) -> Path:
    """A DAGSTER_HOME at `folder` with the project's dagster.yaml, as `make ui` sets one up, and
    a daemon that takes a queued run within a second (`DEQUEUE_EVERY`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text() + DEQUEUE_EVERY)
    return folder


# Dagster's daemon looks for queued runs every 5 s by default: the suite launches about twenty
# runs through one, each waiting 2.5 s on average for nothing but that interval.
DEQUEUE_EVERY = """
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
"""


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
