"""`make preflight` prints the report its own run wrote, passing or failing, never a newer one
of another config, pins or code that lies beside it under the data root."""

from pathlib import Path

import dagster as dg

from prover_assets.launch_preflight import report_file


def run_of(body) -> dg.ExecuteInProcessResult:
    return dg.materialize([dg.asset(name="preflight_report")(body)], raise_on_error=False)


def test_a_passing_preflights_report_is_the_one_its_materialization_names():
    def passed() -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"report_file": dg.MetadataValue.path("/r/a.json")})

    assert report_file(run_of(passed)) == Path("/r/a.json")


def test_a_failed_preflights_report_is_the_one_its_failure_names():
    def failed(context: dg.AssetExecutionContext) -> None:
        # as the preflight asset fails: an observation (which Dagster drops when the step
        # raises) and the failure, each with the report's metadata
        metadata = {"report_file": dg.MetadataValue.path("/r/b.json")}
        context.log_event(dg.AssetObservation(asset_key="preflight_report", metadata=metadata))
        raise dg.Failure("preflight FAILED", metadata=metadata)

    result = run_of(failed)
    assert not result.success
    assert report_file(result) == Path("/r/b.json")


def test_a_run_that_wrote_no_report_names_none():
    def crashed() -> None:
        raise RuntimeError("before any check")

    assert report_file(run_of(crashed)) is None
