"""The report asset's headline metadata: each number its own entry, the per-problem table; and
the `eta` estimate it sets beside what was measured."""

import datetime

import dagster as dg

from prover_assets.assets.keys import ETA_KEY
from prover_assets.assets.report import headline_metadata, latest_eta
from prover_assets.operations.eta import EtaEstimate
from prover_assets.report.summary import McNemarTable
from prover_assets_tests.factories import make_comparison, make_interval, make_paired, make_side

COMPARISON = make_comparison(
    cap=256,
    k=4,
    decision="success",
    p_value=0.0018,
    table=McNemarTable(both=9, baseline_only=1, candidate_only=13, neither=1),
    pass1_difference=make_interval(0.8, 0.66, 0.92),
    baseline=make_side("baseline", 10, problems=24),
    candidate=make_side("candidate", 22, problems=24),
    per_problem=[
        make_paired("p1", (0, 4, False), (3, 4, True), "candidate_only"),
        make_paired("p2", (2, 4, True), (4, 4, True), "both"),
    ],
)


def test_each_headline_number_is_a_typed_entry_of_its_own():
    metadata = headline_metadata(COMPARISON)
    assert metadata["minif2f_c256_baseline_solved_at_4"] == dg.MetadataValue.int(10)
    assert metadata["minif2f_c256_candidate_solved_at_4"] == dg.MetadataValue.int(22)
    assert metadata["minif2f_c256_discordant_candidate_only"] == dg.MetadataValue.int(13)
    assert metadata["minif2f_c256_discordant_baseline_only"] == dg.MetadataValue.int(1)
    assert metadata["minif2f_c256_p_value"] == dg.MetadataValue.float(0.0018)
    assert metadata["minif2f_c256_pass1_difference_low"] == dg.MetadataValue.float(0.66)
    assert metadata["minif2f_c256_decision"] == "success (secondary)"


def test_the_per_problem_table_marks_only_the_discordant_problems():
    table = headline_metadata(COMPARISON)["minif2f_c256_per_problem"]
    rows = [r.data for r in table.records]
    assert [(r["problem"], r["baseline_accepted"], r["candidate_accepted"]) for r in rows] == [
        ("p1", 0, 3),
        ("p2", 2, 4),
    ]
    assert [r["discordant"] for r in rows] == ["candidate_only", ""]


def eta_materialization(total_central: float, sources: list[str]) -> dg.AssetMaterialization:
    table = {
        "steps": [{"step": "export", "low": 0.1, "central": 0.2, "high": 0.4}],
        "total_hours": {"low": 1.0, "central": total_central, "high": 3.0},
        "inputs": {f"input {i}": {"source": source} for i, source in enumerate(sources)},
    }
    return dg.AssetMaterialization(ETA_KEY, metadata={"table": dg.MetadataValue.json(table)})


def test_the_report_reads_the_latest_eta_with_when_it_was_made():
    with dg.instance_for_test() as instance:
        assert latest_eta(instance) is None  # never materialized: the report says so
        instance.report_runless_asset_event(eta_materialization(2.0, ["prior"] * 3))
        later = ["measured", "prior", "preflight", "measured"]
        instance.report_runless_asset_event(eta_materialization(2.5, later))
        made = instance.get_latest_materialization_event(ETA_KEY).timestamp
        estimate = latest_eta(instance)
    at = datetime.datetime.fromtimestamp(made, datetime.UTC).isoformat(timespec="seconds")
    sources = {"measured": 2, "preflight": 1, "prior": 1}
    assert estimate == EtaEstimate(at, sources, {"export": (0.1, 0.2, 0.4)}, (1.0, 2.5, 3.0))


def test_an_eta_from_before_its_table_was_recorded_is_not_read():
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(ETA_KEY, metadata={"inputs_measured": "0 of 16"})
        )
        assert latest_eta(instance) is None
