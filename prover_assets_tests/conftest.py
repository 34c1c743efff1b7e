"""pytest's hooks and the shared fixtures (run configs pointed at temporary data roots, the
tiny model, one `dagster dev`, one demo round). What else the tests share is in `support.py`:
no module imports this one."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from prover_assets_tests.support import (
    ROOT,
    SHARED_ENV,
    dagster_home,
    demo_run_config,
    seed_shared_tunings,
    session_tunings,
)

# The test package is not installed (the distribution is the product): processes the tests start
# (the REPL double, `dagster dev`) find it through the checkout, whatever their working directory.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


# How `make test` deals the tests to its two processes (pytest-xdist): each module whole to one
# of them (its module fixtures built once), the modules that share one `dagster dev` (the CLI,
# the Launchpad, the browser) together, and the groups that run a whole loop or a daemon first,
# longest first, so that no process is left alone with one at the end. xdist's own `loadgroup`
# cannot say this: under pytest 9 its `xdist_group` marks never reach the scheduler.
TEST_PACKAGE = "prover_assets_tests"
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
    *("sft/test_trainer.py", "test_sensors.py", "preflight/test_run.py", "problems/test_pool.py"),
    *(
        "verify/test_worker.py",
        "generation/test_openai_engine.py",
        "report/test_analysis.py",
        "lean/test_repl.py",
    ),
    *("verify/test_verifier.py", "sft/test_export.py", "verify/test_runner.py"),
)


def group_of(nodeid: str) -> str:
    """The group of the test `nodeid`: its module's path under prover_assets_tests/, or the
    group it shares."""
    module = Path(nodeid.split("::", 1)[0])
    if module.parts and module.parts[0] == TEST_PACKAGE:
        module = module.relative_to(TEST_PACKAGE)
    return SHARED_PROCESS_GROUPS.get(str(module), str(module))


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


_OWNS_SHARED = pytest.StashKey[bool]()


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_OWNS_SHARED, False):
        shutil.rmtree(os.environ.pop(SHARED_ENV), ignore_errors=True)


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
    from prover_assets.demo.tiny_model import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model", hidden_size=64, layers=2, vocab_size=1024
    )


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
