"""The runs a user meets before a round can run, in a real browser, each on a server of its own
(not the session's shared `dagster dev`, so this module runs beside the others): the
placeholders of the registered config marked in the Launchpad before launch, a job launched
before its upstream refused at its first step, a run waiting for pool `heavy` terminated from
its page; links to other groups' generations and verdicts told apart as drawn; and `make ui`'s
command stopping on one SIGTERM. Screenshots 10 to 15."""

from __future__ import annotations

import contextlib

import psutil
import pytest

from prover_assets_tests import processes
from prover_assets_tests.browser import (
    BROWSER_MARKS,
    artifacts,
    chromium_page,
    is_launch_mutation,
    wait_for_status,
)
from prover_assets_tests.dagster_ui import shown_in_a_link
from prover_assets_tests.processes import (
    LOCATION,
    dagster_webserver,
    graphql,
    launch_from_launchpad,
    launchpad_scaffold,
    pool_waiting_steps,
    start_pool_run,
    until,
)
from prover_assets_tests.support import ROOT, demo_run_config

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def page():
    with chromium_page() as page:
        yield page


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


@pytest.mark.parametrize(("group", "shot"), [("sft", "14"), ("report", "15")])
def test_each_link_to_another_groups_asset_reads_apart_and_names_its_kind(
    page, registered_webserver, group, shot
):
    page.goto(
        f"{registered_webserver}/locations/{LOCATION}/asset-groups/{group}/lineage",
        wait_until="networkidle",
    )
    links = page.locator("span.label[title]")  # ForeignNode.tsx: the drawn label, titled whole
    links.first.wait_for()
    drawn = {
        links.nth(i).get_attribute("title"): links.nth(i).inner_text() for i in range(links.count())
    }
    kinds = {
        label.split("_")[0] for label in drawn if label.startswith(("generations_", "verdicts_"))
    }
    # The graph draws the links in view only (the report's 30 reach past the window's foot).
    assert kinds <= {"generations", "verdicts"} and kinds and len(drawn) >= 8
    assert all(shown == shown_in_a_link(label) for label, shown in drawn.items())
    assert len(set(drawn.values())) == len(drawn)
    for label, shown in drawn.items():
        if label.startswith(("generations_", "verdicts_")):
            assert shown.startswith(label.split("_")[0] + "_")
    page.screenshot(path=artifacts() / f"{shot}-{group}-links-name-their-kind.png")


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
        # Its Lean steps ready at once (an eval set's reference elaboration and statement
        # audit) each wait for the slot.
        until(lambda: pool_waiting_steps(home) >= 1, "the problems run waiting for the slot")
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
