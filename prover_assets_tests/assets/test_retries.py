"""Retries of the asset steps: those that go nowhere stop as "stalled", those that move keep
going, a deterministic error fails at once."""

from pathlib import Path

import dagster as dg
import pytest

from prover_assets.assets.retries import fail_fast, start_attempt
from prover_assets.operations.retries import ATTEMPTS_FILE, lines_in


def flaky_asset(
    folder: Path, *, lines_per_attempt: int, succeed_at: int, recompute: bool = False
) -> dg.AssetsDefinition:
    """Appends `lines_per_attempt` lines per attempt, then fails until the file has `succeed_at`."""
    stream = folder / "stream.jsonl"

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=5))
    def flaky(context: dg.AssetExecutionContext) -> None:
        start_attempt(context, folder, stream.name, recompute=recompute)
        with open(stream, "a") as handle:
            handle.write("{}\n" * lines_per_attempt)
        if lines_in(stream) < succeed_at:
            raise RuntimeError("the engine died")

    return flaky


def attempts(folder: Path) -> list[str]:
    return (folder / ATTEMPTS_FILE).read_text().splitlines()


def test_a_retry_that_made_no_progress_fails_as_stalled_without_more_retries(tmp_path):
    result = dg.materialize(
        [flaky_asset(tmp_path, lines_per_attempt=0, succeed_at=1)], raise_on_error=False
    )
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    (failure,) = failures
    assert "stalled: attempt 2 starts at 0 done" in failure.event_specific_data.error.message
    assert len(attempts(tmp_path)) == 1  # the stalled retry stopped before starting any work


def test_retries_that_make_progress_continue_until_success(tmp_path):
    result = dg.materialize(
        [flaky_asset(tmp_path, lines_per_attempt=1, succeed_at=3)], raise_on_error=False
    )
    assert result.success
    assert len(attempts(tmp_path)) == 3
    assert lines_in(tmp_path / "stream.jsonl") == 3


def test_recompute_moves_the_previous_output_aside_and_starts_from_nothing(tmp_path):
    folder = tmp_path / "asset"
    folder.mkdir()
    (folder / "stream.jsonl").write_text("{}\n" * 5)
    result = dg.materialize(
        [flaky_asset(folder, lines_per_attempt=1, succeed_at=1, recompute=True)]
    )
    assert result.success
    assert lines_in(folder / "stream.jsonl") == 1
    (moved,) = tmp_path.glob("asset.superseded-*")
    assert lines_in(moved / "stream.jsonl") == 5


def deterministic_errors() -> list[Exception]:
    """A config the run cannot fix, and a verify op whose generation failed for good."""
    from prover_assets.config import ConfigError
    from prover_assets.verify.stages import GenerationFailed

    return [
        ConfigError("resources.experiment.config.spec.data_root is empty"),
        GenerationFailed("the generation failed; 3 verdicts kept for the resume"),
    ]


@pytest.mark.parametrize("error", deterministic_errors(), ids=lambda e: type(e).__name__)
def test_a_deterministic_error_fails_the_step_once_without_retries_and_says_why(tmp_path, error):
    calls = []

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=2, delay=0))
    @fail_fast
    def broken(context: dg.AssetExecutionContext) -> None:
        calls.append(context.retry_number)
        raise error

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=2, delay=0))
    @fail_fast
    def flaky(context: dg.AssetExecutionContext) -> None:
        calls.append(context.retry_number)
        raise ConnectionError("the REPL host went away")

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.materialize([broken], instance=instance, raise_on_error=False)
        failure = result.failure_data_for_node("broken").error
        assert calls == [0]
        assert f"{type(error).__name__}: {error}" in failure.message
        calls.clear()
        dg.materialize([flaky], instance=instance, raise_on_error=False)
        assert calls == [0, 1, 2]  # an infrastructure error is retried
