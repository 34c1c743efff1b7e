"""The browser the UI tests drive: Debian's Chromium, headless, through Playwright; where their
screenshots go (test-artifacts/ui/, or $PROVER_TEST_ARTIFACTS/ui); and what they wait for."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from prover_assets_tests.support import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# What every module of browser tests is marked with: skipped, with the reason, without Chromium.
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="no chromium: `apt-get install chromium` (CI's .ci/run does it when root)",
    ),
]


def artifacts() -> Path:
    folder = Path(os.environ.get("PROVER_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def chromium_page() -> Iterator:
    """A page of a headless Chromium, 1600 x 1000, a minute's patience per action."""
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="pip install playwright (the dev extra)"
    )
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
            ],
        )
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def is_launch_mutation(response) -> bool:
    return "/graphql" in response.url and "LaunchPipelineExecution" in (
        response.request.post_data or ""
    )


def wait_for_success(page, run_url: str, *, timeout_s: float) -> None:
    """Reload the run's own page until it says Success (and fail if it says Failure)."""
    wait_for_status(page, run_url, "Success", "Failure", timeout_s=timeout_s)


def wait_for_status(page, run_url: str, status: str, wrong: str, *, timeout_s: float) -> None:
    """Reload the run's own page until it says `status` (and fail if it says `wrong`)."""
    deadline = time.monotonic() + timeout_s
    page.goto(run_url, wait_until="networkidle")
    while not page.get_by_text(status, exact=True).count():
        assert not page.get_by_text(wrong, exact=True).count(), f"{run_url}: {wrong} in the UI"
        assert time.monotonic() < deadline, f"{run_url} not {status} within {timeout_s} s"
        time.sleep(3)
        page.reload(wait_until="networkidle")
