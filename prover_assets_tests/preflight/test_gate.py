"""Heavy jobs refuse to launch without a passing preflight for their config, pins and code; an
override is recorded by the run and printed by the report."""

from __future__ import annotations

import subprocess
import uuid
from types import SimpleNamespace

import dagster as dg
import pytest
import yaml
from dagster._core.storage.dagster_run import DagsterRun

from prover_assets.assets.report import preflight_overrides
from prover_assets.config import ConfigError, parse_run_config
from prover_assets.definitions import build_definitions
from prover_assets.preflight import (
    PreflightMissing,
    preflight_identity,
    require_passing_preflight,
)
from prover_assets.preflight.gate import (
    HEAVY_JOBS,
    config_sha256,
    passing_report,
    preflight_figures,
    preflight_required,
    report_path,
    write_report,
)
from prover_assets.preflight.model import CheckStatus, PreflightCheck, PreflightReport
from prover_assets.records import GitRevision
from prover_assets.report.render import preflight_provenance
from prover_assets.resources import build_resources, launch_validation
from prover_assets_tests.factories import fake_workspace, with_local_lean
from prover_assets_tests.support import full_demo_run_config


@pytest.fixture
def raw(tmp_path):
    return full_demo_run_config(tmp_path / "data")


def check(name: str, status: CheckStatus) -> PreflightCheck:
    return PreflightCheck(
        name=name, status=status, measured="m", threshold="t", remedy="r", seconds=0.0
    )


def report_of(config, *, status=CheckStatus.PASSED, **identity_changes) -> PreflightReport:
    identity = preflight_identity(config).model_copy(update=identity_changes)
    return PreflightReport(
        identity=identity,
        config_source="test",
        checks=[check("config.placeholders", CheckStatus.PASSED), check("lean.self_test", status)],
        wall_s=1.0,
        finished_at="2026-12-04T00:00:00+00:00",
        simulated=True,
        work_folder=None,
    )


def test_with_no_preflight_a_heavy_job_is_refused_saying_how_to_run_one(raw):
    config = parse_run_config(raw, "test")
    with pytest.raises(PreflightMissing) as refused:
        require_passing_preflight(config, "baseline")
    message = str(refused.value)
    assert "job 'baseline' refused: no preflight has run for this config" in message
    assert "make preflight" in message and "preflight_override" in message


def test_a_passing_preflight_of_other_code_is_named_with_how_it_differs(raw):
    config = parse_run_config(raw, "test")
    write_report(config, report_of(config, code_commit="0" * 40))
    with pytest.raises(PreflightMissing, match=r"was for another code 0{40}"):
        require_passing_preflight(config, "full_round")


def test_a_passing_preflight_of_this_identity_lets_the_job_launch(raw):
    config = parse_run_config(raw, "test")
    report = report_of(config)
    write_report(config, report)
    assert require_passing_preflight(config, "sft") == report


def test_the_passing_report_is_this_identitys_and_none_when_it_failed_or_never_ran(raw):
    config = parse_run_config(raw, "test")
    assert passing_report(config) is None
    write_report(config, report_of(config, status=CheckStatus.FAILED))
    assert passing_report(config) is None
    write_report(config, report_of(config, code_commit="0" * 40))  # another code's passing one
    assert passing_report(config) is None
    passed = report_of(config)
    write_report(config, passed)
    assert passing_report(config) == passed


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r["experiment"]["config"]["spec"]["generation"].update(temperature=0.7),
        lambda r: r["lean"]["config"]["settings"]["simulated"].update(budget_s=31.0),
        lambda r: r["gpu"]["config"]["settings"].update(dtype="bfloat16"),
    ],
    ids=["experiment", "lean", "gpu"],
)
def test_a_change_to_any_section_of_the_config_is_another_identity(raw, change):
    config = parse_run_config(raw, "test")
    write_report(config, report_of(config))
    change(raw["resources"])
    with pytest.raises(PreflightMissing, match="config sha256"):
        require_passing_preflight(parse_run_config(raw, "test"), "baseline")


def test_a_launch_of_each_heavy_job_without_a_preflight_fails_dagsters_config_validation(raw):
    resources = build_resources(parse_run_config(raw, "test"))
    for job in sorted(HEAVY_JOBS):
        with pytest.raises(dg.DagsterInvalidConfigError) as refused:
            launch_validation(resources, job).config_fn(raw)
        (message,) = refused.value.error_messages
        assert message.startswith(f"job {job!r} refused: no preflight")


def test_the_other_jobs_launch_without_a_preflight(raw):
    resources = build_resources(parse_run_config(raw, "test"))
    for job in ("preflight", "problems", "report", "operations"):
        assert launch_validation(resources, job).config_fn(raw) == raw


def test_an_override_lets_a_heavy_job_launch(raw):
    resources = build_resources(parse_run_config(raw, "test"))
    raw["resources"]["experiment"]["config"]["preflight_override"] = "a test without a GPU"
    assert launch_validation(resources, "baseline").config_fn(raw) == raw


def test_the_preflight_job_takes_placeholders_and_others_refuse_them(raw):
    resources = build_resources(parse_run_config(raw, "test"))
    raw["resources"]["experiment"]["config"]["spec"]["report"]["prereg"] = "REPLACE_ME/prereg.md"
    assert launch_validation(resources, "preflight").config_fn(raw) == raw
    with pytest.raises(dg.DagsterInvalidConfigError, match="Error in config for job problems"):
        launch_validation(resources, "problems").config_fn(raw)


def test_an_in_process_launch_without_a_preflight_runs_no_step(tmp_path, raw):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(dg.DagsterInvalidConfigError) as refused:
        build_definitions(path).resolve_job_def("baseline").execute_in_process()
    assert "refused: no preflight" in refused.value.error_messages[0]
    assert not (tmp_path / "data" / "eval_sets").exists()


def test_runs_launched_with_an_override_are_listed_by_the_report(tmp_path):
    with dg.instance_for_test() as instance:
        for job, reason in (("baseline", "no GPU on this box"), ("problems", ""), ("sft", "")):
            config = {"resources": {"experiment": {"config": {"preflight_override": reason}}}}
            instance.add_run(DagsterRun(job_name=job, run_id=str(uuid.uuid4()), run_config=config))
        (line,) = preflight_overrides(instance)
    assert "(job baseline," in line and line.endswith(": no GPU on this box")


def test_the_report_prints_every_override_or_says_there_was_none():
    lines = preflight_provenance(["run r1 (job baseline, 2026-12-04 00:00 UTC): no GPU"])
    assert "1 heavy runs were launched WITHOUT a passing preflight" in lines[0]
    assert lines[1] == "- run r1 (job baseline, 2026-12-04 00:00 UTC): no GPU"
    assert "was launched with `preflight_override`" in preflight_provenance([])[0]


def partitioned_run(job: str) -> SimpleNamespace:
    """What a resource's init context holds of a run of `job`'s iteration 1."""
    run = DagsterRun(job_name=job, run_id="r", tags={"dagster/partition": "1"})
    return SimpleNamespace(run=run, instance=None, log=None)


def test_a_partitioned_heavy_run_without_a_preflight_fails_as_its_resources_start(tmp_path, raw):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    experiment = build_resources(parse_run_config(raw, str(path)))["experiment"]
    with pytest.raises(PreflightMissing, match="job 'iteration' refused"):
        experiment.setup_for_execution(partitioned_run("iteration"))
    experiment.setup_for_execution(partitioned_run("problems"))  # not a heavy job
    config = parse_run_config(raw, str(path))
    write_report(config, report_of(config))
    experiment.setup_for_execution(partitioned_run("iteration"))


HOW = (
    "run the preflight first (`make preflight CONFIG=<this config>`, or launch the `preflight` "
    "job), or, to run without one, set resources.experiment.config.preflight_override to your "
    "reason (the run records it and the report prints it)"
)


@pytest.fixture(params=[True, False], ids=["dirty", "clean"])
def code(request, monkeypatch):
    """The code revision as git gives it, for a tree with and without uncommitted changes."""
    revision = GitRevision("c" * 40, request.param, None)
    monkeypatch.setattr("prover_assets.preflight.gate.git_revision", lambda: revision)
    return revision


def test_the_refusal_without_any_preflight_says_exactly_what_is_missing(raw, code):
    config = parse_run_config(raw, "test")
    sha = preflight_identity(config).config_sha256
    with pytest.raises(PreflightMissing) as refused:
        require_passing_preflight(config, "baseline")
    changes = " with uncommitted changes" if code.dirty else ""
    assert str(refused.value) == (
        f"job 'baseline' refused: no preflight has run for this config (sha256 {sha[:12]}...), "
        f"these pins and code {'c' * 40}{changes}. To launch it, {HOW}."
    )


def test_the_refusal_after_a_failed_preflight_names_its_checks_exactly(raw):
    config = parse_run_config(raw, "test")
    failed = report_of(config, status=CheckStatus.FAILED)
    failed = failed.model_copy(
        update={"checks": [*failed.checks, check("disk.free", CheckStatus.FAILED)]}
    )
    path = write_report(config, failed)
    with pytest.raises(PreflightMissing) as refused:
        require_passing_preflight(config, "sft")
    assert str(refused.value) == (
        "job 'sft' refused: the preflight of 2026-12-04T00:00:00+00:00 for this config, pins and "
        f"code FAILED: lean.self_test (m), disk.free (m). Fix what it names, then {HOW}. Its "
        f"report: {path}"
    )


def test_the_nearest_passing_preflight_is_the_latest_and_each_difference_is_listed(raw):
    config = parse_run_config(raw, "test")
    identity = preflight_identity(config)
    one = report_of(config, code_commit="1" * 40, pins={**identity.pins, "repl_rev": "r1"})
    two = report_of(config, code_commit="2" * 40, pins={**identity.pins, "repl_rev": "r2"})
    # the latest is the one whose folder sorts first: found by time, not by name
    latest, earlier = sorted([one, two], key=lambda r: report_path(config, r.identity))
    write_report(config, earlier.model_copy(update={"finished_at": "2026-12-04T02:00:00+00:00"}))
    path = write_report(
        config, latest.model_copy(update={"finished_at": "2026-12-04T03:00:00+00:00"})
    )
    with pytest.raises(PreflightMissing) as refused:
        require_passing_preflight(config, "baseline")
    differences = "; ".join(identity.differences(latest.identity))
    assert (
        f" The last passing preflight (2026-12-04T03:00:00+00:00, {path}) was for another "
        f"{differences}." in str(refused.value)
    )
    assert differences.count("; ") == 1  # the pin, then the code


def test_a_data_root_left_a_placeholder_is_named_by_its_key_path(raw):
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = "REPLACE_ME/data"
    with pytest.raises(ConfigError) as refused:
        require_passing_preflight(parse_run_config(raw, "test"), "baseline")
    assert str(refused.value) == (
        "resources.experiment.config.spec.data_root is still the placeholder 'REPLACE_ME/data': "
        "fill it in in your config file"
    )


def test_the_identity_is_the_checked_out_commit(raw):
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    identity = preflight_identity(parse_run_config(raw, "test"))
    assert (identity.code_commit, identity.code_dirty) == (head, bool(status.strip()))
    assert identity.pins["backend"] == "simulated" and identity.pins["simulated"] is True


def test_pins_that_do_not_read_back_stand_in_by_their_reason(raw):
    identity = preflight_identity(parse_run_config(raw, "test"), pins_unreadable="no workspace")
    assert identity.pins == {"unreadable": "no workspace"}


def test_a_workspace_with_other_pins_refuses_the_launch_naming_them(tmp_path, raw):
    workspace = fake_workspace(tmp_path / "ws")
    local = with_local_lean(raw, workspace, expected_pins={"repl_rev": "d" * 7})
    with pytest.raises(PreflightMissing) as refused:
        require_passing_preflight(parse_run_config(local, "test"), "baseline")
    assert str(refused.value).startswith(
        "job 'baseline' refused: the verifier's pins cannot vouch for it: the workspace has "
        f"repl_rev {'b' * 40}, the config expects ddddddd"
    )


def test_a_preflight_run_again_replaces_its_report(raw):
    config = parse_run_config(raw, "test")
    write_report(config, report_of(config, status=CheckStatus.FAILED))
    passing = report_of(config)
    write_report(config, passing)
    assert require_passing_preflight(config, "baseline") == passing


@pytest.mark.parametrize("identity", ["this", "another"])
def test_a_report_that_does_not_parse_is_refused_naming_its_file(raw, identity):
    config = parse_run_config(raw, "test")
    other = {"code_commit": "0" * 40} if identity == "another" else {}
    path = write_report(config, report_of(config, **other))
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=rf"(?s){path}: not a preflight report .*; move it aside"):
        require_passing_preflight(config, "baseline")


def test_the_identity_is_the_configs_content_not_the_file_it_was_read_from(raw):
    assert preflight_identity(parse_run_config(raw, "a.yaml")) == preflight_identity(
        parse_run_config(raw, "elsewhere/b.yaml")
    )


# The launch gate's rule by hand: which jobs spend GPU and Lean hours, and an override's reason.
@pytest.mark.parametrize(
    ("job", "override", "required"),
    [
        ("baseline", None, True),
        ("pool_round", None, True),
        ("sft", None, True),
        ("candidate_eval", None, True),
        ("full_round", None, True),
        ("iteration", None, True),
        ("baseline", "checked by hand on 2026-12-06", False),
        ("baseline", "", True),  # an empty reason is no reason
        ("preflight", None, False),
        ("problems", None, False),
        ("report", None, False),
        ("operations", None, False),
    ],
)
def test_a_preflight_is_required_of_exactly_the_heavy_jobs_without_an_override(
    job, override, required
):
    assert preflight_required(job, override) is required


def test_a_config_moved_to_another_data_root_keeps_its_preflight_identity(tmp_path, raw):
    here = parse_run_config(raw, "test")
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = str(tmp_path / "moved")
    moved = parse_run_config(raw, "test")
    assert config_sha256(moved) == config_sha256(here)
    raw["resources"]["experiment"]["config"]["spec"]["generation"]["temperature"] = 0.7
    assert config_sha256(parse_run_config(raw, "test")) != config_sha256(here)


def test_the_figures_are_the_passing_preflights_of_this_identity_and_none_otherwise(raw):
    config = parse_run_config(raw, "test")
    assert preflight_figures(config) == {}  # none ran: the priors stand in
    measured = check("smoke.generation", CheckStatus.PASSED).model_copy(
        update={"figures": {"tokens_per_s": 12.5}}
    )
    passed = report_of(config)
    write_report(config, passed.model_copy(update={"checks": [*passed.checks, measured]}))
    assert preflight_figures(config) == {"tokens_per_s": 12.5}
    failed = report_of(config, status=CheckStatus.FAILED)
    write_report(config, failed.model_copy(update={"checks": [*failed.checks, measured]}))
    assert preflight_figures(config) == {}  # a failed preflight's figures are never read
