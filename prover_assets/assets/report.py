"""The report asset: the paired comparisons, every table, the plots, as an evidence bundle."""

import json
from pathlib import Path

import dagster as dg

from prover_assets.assets.keys import (
    BASELINE,
    CANDIDATE,
    REPORT_GROUP,
    REPORT_KEY,
    eval_set_key,
    generations_key,
    pool_generations_key,
    pool_verdicts_key,
    verdicts_key,
)
from prover_assets.assets.metadata import OUTPUT_DIR
from prover_assets.config import ExperimentSpec
from prover_assets.generation.stages import GENERATIONS_FILE
from prover_assets.problems.stages import PROBLEMS_FILE
from prover_assets.report.analysis import RunFiles
from prover_assets.report.markdown import png_image
from prover_assets.report.stages import ReportSettings, materialize_report
from prover_assets.resources import ExperimentResource
from prover_assets.verify.stages import VERDICTS_FILE

__all__ = ["report_assets"]


class ReportConfig(dg.Config):
    """Run config of the report: `allow_design_mismatch` compares runs whose sampling or
    round-0 prompts differ, for the reason it gives (printed in the report, which is then never
    PRIMARY)."""

    allow_design_mismatch: str | None = None


def report_assets(built: ExperimentSpec) -> list[dg.AssetsDefinition]:
    """The evaluation report asset, with its evidence bundle, for `built`'s eval sets and caps."""
    pairs = [(name, cap) for name in built.eval_sets for cap in built.caps_of(name)]
    rounds = range(built.corrections.rounds + 1)
    deps = [verdicts_key(s, system, c) for s, c in pairs for system in (BASELINE, CANDIDATE)]
    deps += [pool_verdicts_key(r) for r in rounds]

    @dg.asset(
        key=REPORT_KEY,
        group_name=REPORT_GROUP,
        deps=deps,
        kinds={"markdown"},
        description="The registered comparison (PRIMARY only for the registered design) and every "
        "secondary one: tables, exact McNemar, intervals, power, correction lift, limitations, "
        "published as a verifiable evidence bundle.",
    )
    def eval_report(
        context: dg.AssetExecutionContext, config: ReportConfig, experiment: ExperimentResource
    ):
        spec = experiment.model(built)
        report = spec.report

        def files(eval_set: str, system: str, cap: int) -> RunFiles:
            return RunFiles(
                system,
                eval_set,
                cap,
                experiment.complete_file(eval_set_key(eval_set), PROBLEMS_FILE),
                experiment.complete_file(generations_key(eval_set, system, cap), GENERATIONS_FILE),
                experiment.complete_file(verdicts_key(eval_set, system, cap), VERDICTS_FILE),
            )

        settings = ReportSettings(
            experiment=spec.name,
            k=report.k,
            ks=tuple(report.ks),
            alpha=report.alpha,
            resamples=report.bootstrap_resamples,
            seed=report.bootstrap_seed,
            samples_required=spec.generation.n_samples,
            power_fractions=tuple(report.power_discordant_fractions),
            power_gains_points=tuple(report.power_gains_points),
            allow_design_mismatch=config.allow_design_mismatch,
        )
        result = materialize_report(
            experiment.asset_dir(REPORT_KEY),
            [(files(s, BASELINE, c), files(s, CANDIDATE, c)) for s, c in pairs],
            [
                (
                    experiment.complete_file(pool_generations_key(r), GENERATIONS_FILE),
                    experiment.complete_file(pool_verdicts_key(r), VERDICTS_FILE),
                )
                for r in rounds
            ],
            prereg_path=Path(report.prereg),
            config_files=[Path(experiment.source)] if experiment.source else [],
            settings=settings,
            config=spec.model_dump(mode="json"),
        )
        folder = result.folder
        summary = json.loads((folder / "summary.json").read_text())
        plots = sorted((folder / "plots").iterdir())
        metadata = {
            OUTPUT_DIR: dg.MetadataValue.path(str(folder)),
            "report": dg.MetadataValue.md((folder / "report.md").read_text()),
            "plots": dg.MetadataValue.md(
                "\n\n".join(png_image(p.read_bytes(), p.stem) for p in plots)
            ),
            "simulated": result.result.simulated,
            "comparisons": result.result.comparisons,
            "reused_complete_output": result.reused,
        }
        for comparison in summary["comparisons"]:
            name = f"{comparison['eval_set']}_c{comparison['cap']}"
            metadata[f"{name}_decision"] = (
                f"{comparison['decision']} ({'PRIMARY' if comparison['primary'] else 'secondary'})"
            )
            metadata[f"{name}_p_value"] = dg.MetadataValue.float(float(comparison["p_value"]))
        context.log.info(f"report: {folder}")
        return dg.MaterializeResult(metadata=metadata)

    return [eval_report]
