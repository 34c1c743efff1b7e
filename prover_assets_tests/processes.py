"""Long-running helper processes of the tests (`dagster dev`, the daemon), each in its own
session so that it and everything it starts are stopped by their exact process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


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
