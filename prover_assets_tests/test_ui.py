"""The web UI in a real browser: `dagster dev` on 127.0.0.1 with a temporary DAGSTER_HOME,
driven headless by Playwright through Debian's Chromium. Screenshots go to test-artifacts/ui/
(or $PROVER_TEST_ARTIFACTS/ui)."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import psutil
import pytest

from prover_assets_tests import processes
from prover_assets_tests.conftest import ROOT, demo_run_config
from prover_assets_tests.processes import (
    LOCATION,
    dagster_webserver,
    graphql,
    launch_from_launchpad,
    launchpad_scaffold,
    pool_waiting_steps,
    start_pool_run,
    until,
    wait_for_run,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="no chromium: `apt-get install chromium` (CI's .ci/run does it when root)",
    ),
]
playwright = pytest.importorskip(
    "playwright.sync_api", reason="pip install playwright (the dev extra)"
)


def artifacts() -> Path:
    folder = Path(os.environ.get("PROVER_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def dagster_dev(demo_dagster_dev, demo_preflight_run):
    """The session's `dagster dev`, after the preflight its heavy jobs need."""
    return {"url": demo_dagster_dev.url, "data": demo_dagster_dev.data}


@pytest.fixture(scope="module")
def page(dagster_dev):
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


def test_ui_graph_launch_metadata_plot_and_checks(page, dagster_dev):
    url, shots = dagster_dev["url"], artifacts()

    page.goto(f"{url}/asset-groups", wait_until="networkidle")
    for group in ("problems", "baseline", "pool_round", "sft", "candidate", "report"):
        page.get_by_text(group, exact=True).first.wait_for()
    page.screenshot(path=shots / "01-asset-graph.png")

    page.goto(f"{url}/locations/{LOCATION}/jobs/problems", wait_until="networkidle")
    # The launch mutation's answer is the proof of launch; "Materializing..." on the nodes is
    # transient and a short run can come and go between two of the UI's polls.
    with page.expect_response(is_launch_mutation) as launched:
        page.get_by_role("button", name="Materialize all").click()
    launch = launched.value.json()["data"]["launchPipelineExecution"]
    assert launch["__typename"] == "LaunchRunSuccess", launch
    page.screenshot(path=shots / "02-materialization-launched.png")
    wait_for_success(page, f"{url}/runs/{launch['run']['id']}", timeout_s=300)
    page.screenshot(path=shots / "03-run-succeeded.png")

    page.goto(f"{url}/assets/train_pool_candidates", wait_until="networkidle")
    written = len(
        (dagster_dev["data"] / "train_pool_candidates" / "train_pool_candidates.jsonl")
        .read_text()
        .splitlines()
    )
    candidates_row = page.locator("tr", has=page.get_by_text("candidates", exact=True))
    assert candidates_row.first.inner_text().split()[-1] == str(written)
    layers = page.locator("tr", has=page.get_by_text("dropped_by_layer", exact=True)).locator(
        "table"
    )
    assert "beyond_k" in layers.inner_text()  # the markdown table renders as a table
    page.screenshot(path=shots / "04-asset-metadata.png", full_page=True)

    plot_row = page.locator("tr", has=page.get_by_text("where_rows_went", exact=True))
    plot_row.get_by_text("[Show Markdown]").click()
    image = page.get_by_role("dialog").locator("img")
    image.wait_for()
    width, height = image.evaluate("i => [i.naturalWidth, i.naturalHeight]")
    assert width > 100 and height > 100  # the PNG decoded in the browser
    page.screenshot(path=shots / "05-metadata-plot.png")
    page.keyboard.press("Escape")

    page.goto(f"{url}/assets/train_pool_candidates?view=checks", wait_until="networkidle")
    for check in ("counts_reconcile", "enough_candidates"):
        page.get_by_text(check, exact=True).first.wait_for()
    assert page.get_by_text("Succeeded", exact=True).count() == 2
    page.get_by_text(f"= {written} candidates", exact=False).first.wait_for()
    page.screenshot(path=shots / "06-check-results.png")


# The Launchpad page itself: its scaffold shown and launched by its button. Every job's scaffold,
# the full round's included, is launched unedited by test_launchpad.py through the same GraphQL
# call this button sends; here the job is `report`, which after those tests (same server) reads
# what they made rather than making a round again.
@pytest.mark.timeout(1500)
def test_a_job_launched_unedited_from_the_launchpad_page_succeeds(page, dagster_dev):
    url, shots = dagster_dev["url"], artifacts()
    page.goto(f"{url}/locations/{LOCATION}/jobs/report/playground", wait_until="networkidle")
    page.get_by_text("resources:", exact=False).first.wait_for()  # the scaffolded config
    page.screenshot(path=shots / "07-launchpad-scaffold.png")
    with page.expect_response(is_launch_mutation) as launched:
        page.get_by_role("button", name="Launch Run").click()
    launch = launched.value.json()["data"]["launchPipelineExecution"]
    assert launch["__typename"] == "LaunchRunSuccess", launch
    wait_for_success(page, f"{url}/runs/{launch['run']['id']}", timeout_s=1400)
    page.screenshot(path=shots / "08-launchpad-run-succeeded.png")


# After the Launchpad tests' full round (same server), or its baseline alone: every asset it
# reads is materialized once.
def test_a_job_that_reuses_its_outputs_leaves_what_was_made_from_them_synced(page, dagster_dev):
    url, shots = dagster_dev["url"], artifacts()
    downstream = "generations/minif2f/baseline/c256"  # made from the eval set, not by `problems`
    if not (dagster_dev["data"] / downstream / "manifest.json").exists():  # run alone
        launched = launch_from_launchpad(url, "baseline", launchpad_scaffold(url, "baseline"))
        assert wait_for_run(url, launched["run"]["runId"]) == "SUCCESS"
    page.goto(f"{url}/locations/{LOCATION}/jobs/problems", wait_until="networkidle")
    with page.expect_response(is_launch_mutation) as launched:
        page.get_by_role("button", name="Materialize all").click()
    launch = launched.value.json()["data"]["launchPipelineExecution"]
    assert launch["__typename"] == "LaunchRunSuccess", launch
    wait_for_success(page, f"{url}/runs/{launch['run']['id']}", timeout_s=300)
    page.goto(f"{url}/assets/{downstream}", wait_until="networkidle")
    page.get_by_text("Latest materialization", exact=False).first.wait_for()
    # Every output of `problems` was reused: the same data versions, so nothing upstream of
    # the baseline's generations changed (before: "Unsynced", "Upstream data changed").
    assert page.get_by_text("Unsynced", exact=False).count() == 0
    assert page.get_by_text("Upstream data changed", exact=False).count() == 0
    page.screenshot(path=shots / "09-reused-upstream-stays-synced.png")


@pytest.fixture(scope="module")
def registered_webserver(tmp_path_factory):
    """`dagster-webserver` on `configs/p2.yaml` as shipped: its 11 placeholders left."""
    with dagster_webserver(tmp_path_factory.mktemp("p2"), ROOT / "configs" / "p2.yaml") as url:
        yield url


def is_config_validation(response) -> bool:
    return "/graphql" in response.url and "isPipelineConfigValid" in (
        response.request.post_data or ""
    )


def test_the_launchpad_marks_each_placeholder_before_launch(page, registered_webserver):
    shots = artifacts()
    with page.expect_response(is_config_validation) as validated:
        page.goto(
            f"{registered_webserver}/locations/{LOCATION}/jobs/baseline/playground",
            wait_until="networkidle",
        )
    # the Launchpad's own validation of the scaffold, as it shows it
    answer = validated.value.json()["data"]["isPipelineConfigValid"]
    assert answer["__typename"] == "RunConfigValidationInvalid", answer
    missing = sorted(e["message"].split('"')[1] for e in answer["errors"])
    assert missing == ["data_root", "path", "shards", "workspace"]
    page.get_by_text("Missing required config entry", exact=False).first.wait_for()
    assert page.get_by_role("button", name="Launch Run").is_disabled()
    page.screenshot(path=shots / "10-launchpad-marks-placeholders.png")


@pytest.fixture(scope="module")
def fresh_dagster_dev(tmp_path_factory):
    """A second `dagster dev` on the demo config, its data root empty: nothing materialized,
    as a new user's first visit finds it."""
    tmp = tmp_path_factory.mktemp("fresh")
    with processes.dagster_dev(tmp, demo_run_config(tmp / "data")) as dev:
        yield dev


def test_a_job_launched_before_its_upstream_fails_at_its_first_step_naming_what_to_launch(
    page, fresh_dagster_dev
):
    url, shots = fresh_dagster_dev.url, artifacts()
    page.goto(f"{url}/locations/{LOCATION}/jobs/report/playground", wait_until="networkidle")
    page.get_by_text("resources:", exact=False).first.wait_for()
    with page.expect_response(is_launch_mutation) as launched:
        page.get_by_role("button", name="Launch Run").click()
    launch = launched.value.json()["data"]["launchPipelineExecution"]
    assert launch["__typename"] == "LaunchRunSuccess", launch
    wait_for_status(page, f"{url}/runs/{launch['run']['id']}", "Failure", "Success", timeout_s=300)
    said = page.get_by_text("which is not materialized yet", exact=False).first
    said.wait_for()
    assert "launch the `problems` or `baseline` job first" in said.inner_text()
    assert page.get_by_text("FileNotFoundError", exact=False).count() == 0
    page.screenshot(path=shots / "11-out-of-order-launch-refused.png")


def test_a_run_waiting_for_a_slot_is_terminated_from_its_page_and_its_process_ends(
    page, fresh_dagster_dev, tmp_path
):
    url, home, shots = fresh_dagster_dev.url, fresh_dagster_dev.home, artifacts()
    holder = start_pool_run("hold", tmp_path, home, "in_process")  # another run holds `heavy`
    try:
        until(lambda: (tmp_path / "holding").exists(), "the holder taking the slot")
        launched = launch_from_launchpad(url, "problems", launchpad_scaffold(url, "problems"))
        run_id = launched["run"]["runId"]
        until(lambda: pool_waiting_steps(home) == 1, "the problems run waiting for the slot")
        page.goto(f"{url}/runs/{run_id}", wait_until="networkidle")
        page.get_by_text("blocked by limit for pool heavy", exact=False).first.wait_for()
        page.screenshot(path=shots / "12-run-waiting-for-a-slot.png")
        page.get_by_role("button", name="Terminate").first.click()
        page.get_by_role("dialog").get_by_role("button", name="Terminate").click()
        until(lambda: run_status(url, run_id) == "CANCELED", "the run canceled", 60)
        until(lambda: not run_processes(run_id), "the run's processes ended", 30)
        assert pool_waiting_steps(home) == 0  # its pending claim freed with it
        page.reload(wait_until="networkidle")
        page.get_by_text("Canceled", exact=True).first.wait_for()
        page.screenshot(path=shots / "13-waiting-run-terminated.png")
        assert holder.poll() is None  # the run holding the slot is untouched
        (tmp_path / "release").touch()
        assert holder.wait(timeout=120) == 0
        assert (tmp_path / "hold-done").read_text() == "success"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def run_status(url: str, run_id: str) -> str:
    query = "query S($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
    return graphql(url, query, {"id": run_id})["runOrError"]["status"]


def run_processes(run_id: str) -> list[psutil.Process]:
    """The live processes whose command line names the run (its run worker and children)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if process.status() != psutil.STATUS_ZOMBIE and run_id in " ".join(
                process.info["cmdline"] or []
            ):
                found.append(process)
    return found
