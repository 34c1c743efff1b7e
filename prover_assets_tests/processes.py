"""Long-running helper processes of the tests (`dagster dev`, the daemon), each in its own
session so that it and everything it starts are stopped by their exact process group."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def process_group(
    command: Sequence[str | Path], *, cwd: Path, env: Mapping[str, str], log_path: Path
) -> Iterator[subprocess.Popen]:
    """Run `command` (output to `log_path`); on exit SIGTERM its group, SIGKILL after 60 s."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(part) for part in command],
            cwd=cwd,
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_serving(url: str, process: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {process.returncode}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{url}/server_info", timeout=5) as response,
        ):
            if response.status == 200:
                return
        time.sleep(1)
    raise TimeoutError(f"dagster dev did not serve {url} within {timeout} s")


@contextlib.contextmanager
def dagster_dev(tmp: Path, run_config: dict) -> Iterator[str]:
    """`dagster dev` (webserver and daemon) on 127.0.0.1 with a fresh DAGSTER_HOME under `tmp`
    and the definitions built from `run_config`; yields the webserver's URL."""
    from prover_assets_tests.conftest import dagster_home

    home = dagster_home(tmp / "dagster_home")
    config = tmp / "run_config.yaml"
    config.write_text(yaml.safe_dump(run_config))
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PROVER_ASSETS_CONFIG": str(config)}
    command = [Path(sys.executable).parent / "dagster", "dev", "-h", "127.0.0.1", "-p", str(port)]
    with process_group(
        [*command, "-w", "workspace.yaml"], cwd=ROOT, env=env, log_path=tmp / "dagster-dev.log"
    ) as process:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, process)
        yield url
