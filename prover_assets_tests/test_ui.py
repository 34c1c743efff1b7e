"""The web UI in a real browser: `dagster dev` on 127.0.0.1 with a temporary DAGSTER_HOME,
driven headless by Playwright through Debian's Chromium (`browser.py`). Screenshots go to
test-artifacts/ui/ (or $PROVER_TEST_ARTIFACTS/ui). The runs that cannot start yet (refused,
waiting, marked before launch) are test_ui_edges.py's, on servers of their own."""

from __future__ import annotations

import pytest

from prover_assets_tests.browser import (
    BROWSER_MARKS,
    artifacts,
    chromium_page,
    is_launch_mutation,
    wait_for_success,
)
from prover_assets_tests.processes import (
    LOCATION,
    launch_from_launchpad,
    launchpad_scaffold,
    wait_for_run,
)

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def dagster_dev(demo_dagster_dev, demo_preflight_run):
    """The session's `dagster dev`, after the preflight its heavy jobs need."""
    return {"url": demo_dagster_dev.url, "data": demo_dagster_dev.data}


@pytest.fixture(scope="module")
def page(dagster_dev):
    with chromium_page() as page:
        yield page


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
    # made from the eval set, not by `problems`
    downstream = "generations/minif2f/baseline/generations_baseline_minif2f_c256"
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
