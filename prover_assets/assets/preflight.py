"""The `preflight_report` asset (the `preflight` job): every check of the environment a registered round needs, in minutes,
before its hours; heavy jobs refuse to launch without a passing one (`resources`)."""

import dagster as dg

from prover_assets.assets.keys import PREFLIGHT_GROUP, PREFLIGHT_KEY, Schedule
from prover_assets.assets.metadata import display_number
from prover_assets.config import assemble_run_config
from prover_assets.preflight import PreflightCheck, PreflightReport, run_preflight
from prover_assets.resources import ExperimentResource, GpuResource, LeanResource

__all__ = ["preflight_assets"]


def _metadata(report: PreflightReport, path: str) -> dict[str, object]:
    ok = sum(check.ok for check in report.checks)
    return {
        "passed": report.passed,
        "checks": f"{ok} of {len(report.checks)} ok",
        "failed": ", ".join(c.name for c in report.failed()) or "none",
        "wall_s": dg.MetadataValue.float(display_number(report.wall_s)),
        "report": dg.MetadataValue.md(report.markdown()),
        "report_file": dg.MetadataValue.path(path),
        "figures": dg.MetadataValue.json(
            {name: display_number(value) for name, value in report.figures().items()}
        ),
        "simulated": report.simulated,
    }


def preflight_assets(schedule: Schedule) -> list[dg.AssetsDefinition]:
    """The `preflight_report` asset (in its own group, the `preflight` job's)."""

    @dg.asset(
        key=PREFLIGHT_KEY,
        group_name=PREFLIGHT_GROUP,
        pool=schedule.gpu_pool,  # it loads the model on the GPUs and starts Lean workers
        kinds={"markdown"},
        description="The config, the model folder, the Lean workspace (pins, a round trip, one "
        "import with its memory, the self-test), host memory, the GPUs, the golden prompt, a "
        "smoke round (sampling, verdicts, two optimizer steps at the registered micro-batch, an "
        "export with its parity) and the disk, each a named result. Heavy jobs refuse to launch "
        "without a passing one for the same config, pins and code.",
    )
    def preflight_report(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        lean: LeanResource,
        gpu: GpuResource,
    ):
        config = assemble_run_config(
            experiment.model(), lean.model(), gpu.model(), experiment.source
        )

        def told(check: PreflightCheck) -> None:
            context.log.info(
                f"{check.name}: {check.status.value} ({check.seconds:.1f} s) {check.measured}"
            )

        report, path = run_preflight(config, progress=told)
        metadata = _metadata(report, str(path))
        if not report.passed:
            # The failure carries the report's metadata: an event logged before a step raises
            # never reaches the event log (Dagster yields logged events after the body returns).
            failed = "; ".join(f"{c.name}: {c.measured} -> {c.remedy}" for c in report.failed())
            raise dg.Failure(
                description=f"preflight FAILED ({len(report.failed())} checks): {failed}. "
                f"Report: {path}",
                metadata=metadata,
                allow_retries=False,
            )
        context.log.info(f"preflight passed: {len(report.checks)} checks in {report.wall_s:.1f} s")
        return dg.MaterializeResult(metadata=metadata)

    return [preflight_report]
