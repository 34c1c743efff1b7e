"""Shared fixtures: run configs pointed at temporary data roots."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
# The test package is not installed (the distribution is the product): processes the tests start
# (the REPL double, `dagster dev`) find it through the checkout, whatever their working directory.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


# How `make test` deals the tests to its two processes (pytest-xdist): each module whole to one
# of them (its module fixtures built once), the modules that share one `dagster dev` (the CLI,
# the Launchpad, the browser) together, and the groups that run a whole loop or a daemon first,
# longest first, so that no process is left alone with one at the end. xdist's own `loadgroup`
# cannot say this: under pytest 9 its `xdist_group` marks never reach the scheduler.
SHARED_PROCESS_GROUPS = {
    "test_demo.py": "demo",
    "test_demo_gates.py": "demo",
    "test_jobs.py": "dagster_dev",
    "test_launchpad.py": "dagster_dev",
    "test_ui.py": "dagster_dev",
}
# Then the modules that take longest without a loop (measured with `--durations`, 2026-12-06:
# the kill trials' modules in `make test`, then the fast suite's longest), so that neither
# process ends alone on a long module.
LONGEST_GROUPS_FIRST = (
    *("dagster_dev", "demo", "test_demo_iterations.py", "test_demo_null.py"),
    *("test_ui_edges.py", "test_make_ui.py"),
    *("test_sft_trainer.py", "test_sensors.py", "test_preflight_run.py", "test_problems_pool.py"),
    *("test_worker.py", "test_openai_engine.py", "test_report.py", "test_repl.py"),
    *("test_verifier.py", "test_sft_export.py", "test_verify_runner.py"),
)


def group_of(nodeid: str) -> str:
    """The group of the test `nodeid`: its module's file name, or the group it shares."""
    module = Path(nodeid.split("::", 1)[0]).name
    return SHARED_PROCESS_GROUPS.get(module, module)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        group = group_of(item.nodeid)
        return (
            LONGEST_GROUPS_FIRST.index(group)
            if group in LONGEST_GROUPS_FIRST
            else len(LONGEST_GROUPS_FIRST)
        )

    items.sort(key=rank)  # stable: within a group, and among the rest, collection order stays


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
    from prover_assets.generation.shared_tunings import read_tuning

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


def pytest_configure(config: pytest.Config) -> None:
    if SHARED_ENV not in os.environ:
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="prover-assets-tests-")
        config.stash[_OWNS_SHARED] = True
    if not hasattr(config, "workerinput"):  # once, before the workers of `pytest -n` start
        seed_shared_tunings(session_tunings())
    # Under `pytest -n N`, on the process that starts the workers (they inherit it, and it
    # imports no torch itself): each worker's torch, and every process it starts, takes its share
    # of the cores. Two workers each spinning a thread per core would thrash (measured: format
    # tuning 5x slower).
    workers = config.getoption("numprocesses", None)
    if isinstance(workers, int) and workers > 0:
        threads = str(max(1, (os.cpu_count() or 1) // workers))
        for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(variable, threads)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_OWNS_SHARED, False):
        shutil.rmtree(os.environ.pop(SHARED_ENV), ignore_errors=True)


_OWNS_SHARED = pytest.StashKey[bool]()


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
def demo_dagster_dev(tmp_path_factory):
    """`dagster dev` (webserver and daemon) on the mechanics-size demo config, shared by the
    tests of the CLI, the Launchpad and the browser (the `dagster_dev` group: one worker): the
    later ones reuse what the earlier ones materialized, as a user's relaunch does."""
    from prover_assets_tests.processes import dagster_dev

    tmp = tmp_path_factory.mktemp("dagster_dev")
    with dagster_dev(tmp, demo_run_config(tmp / "data")) as dev:
        yield dev


@pytest.fixture(scope="session")
def demo_preflight_run(demo_dagster_dev):
    """The preflight job launched unedited from the Launchpad of `demo_dagster_dev` (heavy jobs
    launch only after a passing one), as the README's first step: the Launchpad's scaffold,
    launched, and its run once it ended."""
    import dagster as dg

    from prover_assets_tests.processes import (
        launch_from_launchpad,
        launchpad_scaffold,
        wait_for_run,
    )

    url = demo_dagster_dev.url
    launched = launch_from_launchpad(url, "preflight", launchpad_scaffold(url, "preflight"))
    assert launched["__typename"] == "LaunchRunSuccess", launched
    wait_for_run(url, launched["run"]["runId"])
    with dg.DagsterInstance.from_config(str(demo_dagster_dev.home)) as instance:
        return instance.get_run_by_id(launched["run"]["runId"])


@pytest.fixture(scope="session")
def finished_round(tmp_path_factory) -> dict:
    """The demo loop run once in this process (`demo_round.run_demo_round`): the modules of the
    `demo` group read its outputs, and copy them where they change them."""
    from prover_assets_tests.demo_round import run_demo_round

    return run_demo_round(tmp_path_factory.mktemp("smoke"))
