"""`make ui` (`dagster dev` on the project's workspace and dagster.yaml) as a user stops it: one
SIGTERM ends every process it started. A module of its own so that its server starts beside
the session's shared one, not after it."""

import pytest

pytestmark = pytest.mark.slow  # a webserver, a daemon and a code server started and stopped


def test_dagster_dev_as_make_ui_runs_it_stops_on_one_sigterm_with_its_whole_tree(tmp_path):
    """`make ui`'s command (webserver, daemon, code server: a tree of processes), idle, then one
    SIGTERM as `make` passes it on: every process ends by itself within the 10 s the UI issue
    asks (measured on the 2-core machine: 1.5 to 2.0 s, 3 of 3), none needs a SIGKILL."""
    import os
    import signal
    import subprocess
    import time

    import psutil

    from prover_assets_tests.processes import BIN, free_port, wait_until_serving
    from prover_assets_tests.support import ROOT, dagster_home

    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home(tmp_path / "home")),
        "PROVER_ASSETS_CONFIG": str(ROOT / "configs" / "demo.yaml"),
    }
    port = free_port()
    command = [str(BIN / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(port)]
    dev = subprocess.Popen(
        [*command, "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", dev)
        tree = psutil.Process(dev.pid).children(recursive=True)
        assert len(tree) >= 3  # the webserver, the daemon, the code server
        dev.send_signal(signal.SIGTERM)
        started = time.monotonic()
        dev.wait(timeout=10)
        left_s = max(0.0, 10 - (time.monotonic() - started))
        _, alive = psutil.wait_procs(tree, timeout=left_s)
        assert alive == [], f"alive 10 s after one SIGTERM: {[p.cmdline() for p in alive]}"
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
