"""The report asset's headline metadata: each number its own entry, the per-problem table."""

import dagster as dg

from prover_assets.assets.report import headline_metadata

COMPARISON = {
    "eval_set": "minif2f",
    "cap": 256,
    "k": 4,
    "primary": False,
    "decision": "success",
    "p_value": 0.0018,
    "table": {"both": 9, "baseline_only": 1, "candidate_only": 13, "neither": 1},
    "pass1_difference": {"estimate": 0.8, "low": 0.66, "high": 0.92},
    "baseline": {"solved_at_k": 10},
    "candidate": {"solved_at_k": 22},
    "per_problem": [
        {
            "problem_id": "p1",
            "baseline": {"c": 0, "n": 4, "solved": False},
            "candidate": {"c": 3, "n": 4, "solved": True},
            "cell": "candidate_only",
        },
        {
            "problem_id": "p2",
            "baseline": {"c": 2, "n": 4, "solved": True},
            "candidate": {"c": 4, "n": 4, "solved": True},
            "cell": "both",
        },
    ],
}


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
