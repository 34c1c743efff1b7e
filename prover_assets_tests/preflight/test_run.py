"""The preflight as one call: on the demo config every check passes in order and the report is
kept where heavy jobs look; after a check fails, those that need it are blocked, not run."""

from __future__ import annotations

from pathlib import Path

import pytest

from prover_assets.config import parse_run_config
from prover_assets.preflight import CheckStatus, PreflightCheck, PreflightSettings, run_preflight
from prover_assets.preflight.gate import report_path, require_passing_preflight
from prover_assets.preflight.run import STEPS, PreflightState, Step, run_step
from prover_assets_tests.factories import fake_workspace, preflight_config, with_local_lean
from prover_assets_tests.support import full_demo_run_config

# The order the issue asks for: config, Lean, GPUs and the prompt, the smoke round, the disk.
ORDER = [
    "config.placeholders",
    "config.paths",
    "model.load",
    "model.files",
    "model.revision",
    "lean.pins",
    "lean.round_trip",
    "lean.import",
    "lean.self_test",
    "host.memory",
    "gpu.devices",
    "prompt.golden",
    "prompt.context",
    "smoke.generation",
    "smoke.verification",
    "training.memory_plan",
    "training.attention",
    "smoke.training",
    "smoke.export",
    "disk.free",
    "round.balance",
]


PREFLIGHT_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from prover_assets.preflight import run_preflight
from prover_assets_tests.factories import preflight_config
run_preflight(preflight_config(Path({data!r})))
"""


def killed_in_the_smoke_round(data: Path) -> list[Path]:
    """A preflight in a process of its own, killed with kill -9 (its whole group) once its smoke
    round has sampled; the work folders it left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = PREFLIGHT_SCRIPT.format(root=str(Path(__file__).parents[2]), data=str(data))
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 600  # a bound on a hung preflight, not an expectation
    while not list((data / "preflight").glob("work-*/generations.jsonl")):
        assert process.poll() is None and time.monotonic() < deadline, "no smoke round seen"
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return list((data / "preflight").glob("work-*"))


@pytest.fixture(scope="module")
def passed(tmp_path_factory):
    """The demo config's preflight, run after one of the same identity was killed in its smoke
    round on the same data root (the next preflight is the one that removes what it left)."""
    data = tmp_path_factory.mktemp("preflight") / "data"
    left = killed_in_the_smoke_round(data)
    config = preflight_config(data)
    seen = []
    report, path = run_preflight(config, progress=lambda check: seen.append(check.name))
    return {
        "config": config,
        "report": report,
        "path": path,
        "seen": seen,
        "data": data,
        "left": left,
    }


@pytest.mark.slow
def test_the_demo_config_passes_every_check_in_the_registered_order(passed):
    report = passed["report"]
    assert [c.name for c in report.checks] == ORDER
    assert passed["seen"] == ORDER  # told as each finished
    assert report.passed, report.markdown()
    statuses = {c.name: c.status for c in report.checks}
    # the demo samples and trains on CPU with a simulated verifier: said, not passed off
    assert statuses["gpu.devices"] == CheckStatus.NOT_APPLICABLE
    assert statuses["lean.pins"] == CheckStatus.NOT_APPLICABLE
    assert report.simulated


@pytest.mark.slow
def test_the_report_is_kept_where_the_launch_looks_and_the_work_folder_is_removed(passed):
    config, report = passed["config"], passed["report"]
    assert passed["path"] == report_path(config, report.identity)
    assert require_passing_preflight(config, "baseline") == report
    assert report.work_folder is None
    kept = [p.name for p in (passed["data"] / "preflight").iterdir()]
    assert kept == [passed["path"].parent.name]


@pytest.mark.slow
def test_the_smoke_round_measures_the_rates_the_eta_reads(passed):
    figures = passed["report"].figures()
    assert figures["tokens_per_s"] > 0
    assert figures["sft_tokens_per_s"] > 0
    assert "generation startup s" in figures
    # one worker's seconds a proof in the self-test, over the demo's 2 workers
    self_test = next(c for c in passed["report"].checks if c.name == "lean.self_test")
    per_proof = float(self_test.measured.rsplit("; ", 1)[1].split(" s a proof")[0])
    assert figures["verify_s_per_code_sample"] == pytest.approx(per_proof / 2, abs=0.01)


@pytest.mark.slow
def test_the_markdown_has_a_row_per_check_with_measured_value_and_threshold(passed):
    markdown = passed["report"].markdown()
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == ORDER
    golden = next(r for r in rows if "`prompt.golden`" in r)
    assert "identical" in golden and "byte-identical" in golden


def stand_in_for_the_smoke_round(patch: pytest.MonkeyPatch) -> None:
    """The smoke round's sampling and training replaced by checks that say they are stand-ins:
    the tests of a failed Lean check read its verdicts and its work folder, not a round (the
    `passed` preflight runs a real one)."""
    from prover_assets.preflight import smoke

    def stand_in(name: str) -> PreflightCheck:
        return PreflightCheck(
            name=name,
            status=CheckStatus.FAILED,
            measured="STAND-IN: not run by this test",
            threshold="-",
            remedy="-",
            seconds=0.0,
        )

    patch.setattr(smoke, "generation_check", lambda *args: (stand_in("smoke.generation"), []))
    patch.setattr(smoke, "training_check", lambda *args: (stand_in("smoke.training"), None, None))


@pytest.fixture(scope="module")
def repl_never_answers(tmp_path_factory):
    """One preflight whose REPL never answers (the two tests below share it), and whether its
    work folder was there right after it."""
    tmp = tmp_path_factory.mktemp("silent-repl")
    workspace = fake_workspace(tmp / "ws")
    raw = full_demo_run_config(tmp / "data")
    config = parse_run_config(with_local_lean(raw, workspace, command=["sleep", "600"]), "test")
    settings = PreflightSettings(round_trip_timeout_s=1.0, smoke_samples=1)
    with pytest.MonkeyPatch.context() as patch:
        stand_in_for_the_smoke_round(patch)
        report, path = run_preflight(config, settings)
    kept = report.work_folder is not None and Path(report.work_folder).is_dir()
    return {"config": config, "settings": settings, "report": report, "path": path, "kept": kept}


@pytest.mark.slow
def test_after_a_repl_that_never_answers_the_import_and_self_test_are_blocked_and_launch_refused(
    repl_never_answers,
):
    report, config = repl_never_answers["report"], repl_never_answers["config"]
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["lean.round_trip"] == CheckStatus.FAILED
    assert statuses["lean.import"] == statuses["lean.self_test"] == CheckStatus.BLOCKED
    assert statuses["smoke.verification"] == CheckStatus.BLOCKED
    assert not report.passed
    assert repl_never_answers["kept"]  # its work folder, with its logs, kept
    with pytest.raises(ValueError, match=r"FAILED: lean\.round_trip"):
        require_passing_preflight(config, "baseline")
    assert repl_never_answers["path"].exists()


@pytest.mark.slow
def test_a_failed_preflights_folder_is_kept_until_the_next_of_its_identity_which_sweeps_it(
    repl_never_answers, monkeypatch
):
    from prover_assets.preflight.run import KEPT_MARKER, identity_key
    from prover_assets.records.owned import HOST
    from prover_assets_tests.records.test_owned import dead_pid

    config, settings = repl_never_answers["config"], repl_never_answers["settings"]
    first = repl_never_answers["report"]
    kept = Path(first.work_folder)
    assert (kept / KEPT_MARKER).is_file()  # failed: kept for inspection, marked
    root = kept.parent
    key = identity_key(first.identity)
    killed = root / f"work-{key}-20260101T000000-h{HOST}-p{dead_pid()}-0a1b"  # no report
    killed.mkdir()
    (killed / "smoke.bin").write_bytes(b"x" * 1024)
    other = root / f"work-{'f' * 12}-20260101T000000-h{HOST}-p{dead_pid()}-0a1c"
    other.mkdir()
    (other / KEPT_MARKER).write_text("{}")  # another config's failed preflight
    stand_in_for_the_smoke_round(monkeypatch)
    second, _ = run_preflight(config, settings)
    assert not kept.exists() and not killed.exists()
    assert other.exists() and Path(second.work_folder).exists()
    assert {line.split(" (")[0] for line in second.swept} == {str(killed), str(kept)}
    assert f"{killed} (0.0 MiB)" in second.swept  # 1 KiB, said with its size
    assert "Removed the work folders of earlier preflights" in second.markdown()


@pytest.mark.slow
def test_kill_9_in_the_smoke_round_leaves_a_work_folder_the_next_preflight_removes(passed):
    left = passed["left"]
    assert len(left) == 1  # the smoke round's samples (and model), no report naming them
    report = passed["report"]
    assert report.passed, report.markdown()
    assert [line.split(" (")[0] for line in report.swept] == [str(left[0])]
    assert list((passed["data"] / "preflight").glob("work-*")) == []  # its own removed too


def made(name: str, status: CheckStatus) -> PreflightCheck:
    return PreflightCheck(
        name=name, status=status, measured="m", threshold="t", remedy="r", seconds=0.0
    )


def state_after(tmp_path: Path, *done: PreflightCheck) -> PreflightState:
    state = PreflightState(preflight_config(tmp_path), PreflightSettings(), tmp_path / "work")
    state.done.extend(done)
    return state


def never_run(state: PreflightState) -> PreflightCheck:
    raise AssertionError("a blocked step was run")


def test_every_steps_needs_are_checks_that_run_before_it():
    names = [step.name for step in STEPS]
    assert len(set(names)) == len(names)
    for index, step in enumerate(STEPS):
        assert set(step.needs) <= set(names[:index]), step.name


@pytest.mark.parametrize(
    ("before", "blocked_by"),
    [
        ((("a", CheckStatus.FAILED), ("b", CheckStatus.PASSED)), "a"),
        ((("a", CheckStatus.PASSED), ("b", CheckStatus.BLOCKED)), "b"),
        ((("a", CheckStatus.FAILED), ("b", CheckStatus.FAILED)), "a"),  # the first it needs
    ],
)
def test_a_step_whose_needs_did_not_pass_is_blocked_by_the_first_that_did_not(
    tmp_path, before, blocked_by
):
    state = state_after(tmp_path, *(made(name, status) for name, status in before))
    check = run_step(Step("c", never_run, ("a", "b")), state)
    assert (check.name, check.status) == ("c", CheckStatus.BLOCKED)
    assert check.measured == f"not run: {blocked_by} failed"


def test_a_step_runs_when_its_needs_passed_or_do_not_apply(tmp_path):
    state = state_after(
        tmp_path, made("a", CheckStatus.PASSED), made("b", CheckStatus.NOT_APPLICABLE)
    )
    check = run_step(Step("c", lambda s: made("c", CheckStatus.FAILED), ("a", "b")), state)
    assert check.status == CheckStatus.FAILED


def test_a_step_that_makes_a_check_of_another_name_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="the step c made the check d"):
        run_step(Step("c", lambda s: made("d", CheckStatus.PASSED)), state_after(tmp_path))
