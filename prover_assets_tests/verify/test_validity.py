"""The verifier's identity: what two verdicts must share to be compared, and the check that
every verdict of a set shares it."""

from __future__ import annotations

import pytest

from prover_assets.records import Stage, VerifierInfo, publish_records
from prover_assets.verify.elaboration import Elaboration, ElaborationStatus
from prover_assets.verify.runner import CHUNKS_FILE, CommitChunk
from prover_assets.verify.validity import (
    check_chunks,
    check_infrastructure_share,
    check_infrastructure_within_bound,
    check_no_length_capped_accepted,
    check_references_elaborate,
    check_verdicts_cover_generations,
    check_verifier_identical,
    verdict_identity,
)
from prover_assets_tests.factories import (
    VERIFIER_CONFIG,
    make_generation,
    make_pins,
    make_verification,
)


def info(workers: int = 1, pins=None, **config) -> VerifierInfo:
    return VerifierInfo(
        pins=pins or make_pins(), config={**VERIFIER_CONFIG, **config}, workers=workers
    )


def test_workers_command_and_recycling_do_not_change_the_identity():
    plain = verdict_identity(info())
    busy = verdict_identity(info(workers=64, command=["lake", "exe", "repl"], recycle_after=50))
    assert busy == plain
    assert busy.key == plain.key


def test_a_budget_written_as_an_integer_is_the_same_budget():
    assert verdict_identity(info(budget_s=180)) == verdict_identity(info(budget_s=180.0))


def test_the_sandbox_record_s_key_order_does_not_change_the_key():
    sandbox = VERIFIER_CONFIG["sandbox"]
    reordered = dict(reversed(list(sandbox.items())))
    assert list(reordered) != list(sandbox)
    assert verdict_identity(info(sandbox=reordered)).key == verdict_identity(info()).key


def test_a_field_the_verifier_did_not_record_is_none_and_differs_from_a_recorded_one():
    remote = {k: v for k, v in VERIFIER_CONFIG.items() if k != "memory_cap_mb"}
    unrecorded = verdict_identity(VerifierInfo(pins=make_pins(), config=remote, workers=1))
    assert unrecorded.config.memory_cap_mb is None
    assert unrecorded.differences(verdict_identity(info())) == ["memory_cap_mb None, 12288"]


def test_differences_name_each_differing_pin_and_field_with_both_values():
    ours = verdict_identity(info(budget_s=60.0))
    theirs = verdict_identity(info(pins=make_pins(repl_rev="0ther"), gate=False))
    assert ours.differences(theirs) == [
        "repl_rev 7df77c0a, 0ther",
        "budget_s 60.0, 180.0",
        "gate True, False",
    ]
    assert ours.differences(ours) == []


def test_verdict_files_of_one_verifier_pass_and_of_two_fail_naming_both(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    publish_records(first, [make_verification(make_generation("p1", i)) for i in range(3)])
    publish_records(second, [make_verification(make_generation("p2", 0))])
    same = check_verifier_identical([first, second])
    assert (same.passed, same.description) == (
        True,
        "1 distinct verifier identities across 2 verdict files",
    )
    publish_records(
        second := tmp_path / "c.jsonl",
        [make_verification(make_generation("p2", 0), pins=make_pins(lean_version="v4.10.0"))],
    )
    mixed = check_verifier_identical([first, second])
    assert (mixed.passed, mixed.description) == (
        False,
        "2 distinct verifier identities across 2 verdict files",
    )
    versions = [i["pins"]["lean_version"] for i in mixed.metadata["identities"]]
    assert sorted(versions) == ["v4.10.0", "v4.9.0-rc1"]


# --- the verdict files' validity checks, each by a hand-built file ---------------------------


def infrastructure(problem_id: str, sample_idx: int = 0):
    return make_verification(
        make_generation(problem_id, sample_idx),
        accepted=False,
        stage=Stage.INFRASTRUCTURE,
        reasons=["infrastructure:crash"],
    )


def test_a_verdict_without_a_generation_and_a_generation_without_a_verdict_are_both_named(
    tmp_path,
):
    generations, verdicts = tmp_path / "g.jsonl", tmp_path / "v.jsonl"
    publish_records(generations, [make_generation("p1", 0), make_generation("p1", 1)])
    publish_records(
        verdicts,
        [make_verification(make_generation("p1", 0)), make_verification(make_generation("p2", 0))],
    )
    outcome = check_verdicts_cover_generations(generations, verdicts)
    assert (outcome.passed, outcome.description) == (
        False,
        "1 verdicts without a generation, 1 generations without a verdict",
    )
    assert outcome.metadata == {"orphans": [["p2", 0, 0, 64]], "unjudged": [["p1", 1, 0, 64]]}
    publish_records(
        verdicts2 := tmp_path / "v2.jsonl",
        [make_verification(make_generation("p1", i)) for i in (0, 1)],
    )
    covered = check_verdicts_cover_generations(generations, verdicts2)
    assert (covered.passed, covered.description) == (
        True,
        "0 verdicts without a generation, 0 generations without a verdict",
    )


def test_an_accepted_sample_cut_off_at_its_cap_fails_and_a_rejected_one_does_not(tmp_path):
    capped = make_generation("p1", 0, completion_ids=[5] * 64, finish_reason="length")
    rejected_capped = make_generation("p2", 0, completion_ids=[5] * 64, finish_reason="length")
    whole = make_generation("p3", 0)
    generations, verdicts = tmp_path / "g.jsonl", tmp_path / "v.jsonl"
    publish_records(generations, [capped, rejected_capped, whole])
    publish_records(
        verdicts,
        [
            make_verification(capped),
            make_verification(rejected_capped, accepted=False),
            make_verification(whole),
        ],
    )
    outcome = check_no_length_capped_accepted(generations, verdicts)
    assert (outcome.passed, outcome.description) == (
        False,
        "1 length-capped samples accepted (2 capped)",
    )
    assert outcome.metadata == {"accepted_capped": [["p1", 0, 0, 64]]}


def test_a_chunk_more_than_half_dead_fails_and_exactly_half_does_not(tmp_path):
    chunks = tmp_path / CHUNKS_FILE
    publish_records(
        chunks,
        [
            CommitChunk(index=0, samples=4, infrastructure=2),  # half: still a measurement
            CommitChunk(index=1, samples=4, infrastructure=3),
            CommitChunk(index=2, samples=5, infrastructure=0),
        ],
    )
    outcome = check_chunks(chunks)
    assert (outcome.passed, outcome.description) == (
        False,
        "3 chunks, 5 infrastructure failures, 1 chunks over half dead",
    )
    assert outcome.metadata == {"bad_chunks": [1], "infrastructure": 5}


def test_no_chunks_file_is_no_chunk_over_half_dead(tmp_path):
    outcome = check_chunks(tmp_path / CHUNKS_FILE)
    assert (outcome.passed, outcome.description) == (
        True,
        "0 chunks, 0 infrastructure failures, 0 chunks over half dead",
    )


@pytest.mark.parametrize(
    ("bound", "passed"), [(0.25, True), (0.2, False)], ids=["at_the_bound", "over_it"]
)
def test_the_infrastructure_share_passes_up_to_its_bound_inclusive(tmp_path, bound, passed):
    verdicts = tmp_path / "v.jsonl"
    publish_records(
        verdicts,
        [infrastructure("p1"), *(make_verification(make_generation(f"p{i}")) for i in (2, 3, 4))],
    )
    outcome = check_infrastructure_share(verdicts, bound)
    assert outcome.passed is passed
    assert outcome.description == (
        f"1 of 4 verdicts are infrastructure (bound {bound:.2%}); re-run the asset to verify "
        "them again"
    )
    assert outcome.metadata == {"infrastructure": 1, "rows": 4, "bound": bound}


def test_no_infrastructure_verdict_has_none_to_verify_again(tmp_path):
    verdicts = tmp_path / "v.jsonl"
    publish_records(verdicts, [make_verification()])
    outcome = check_infrastructure_share(verdicts, 0.0)
    assert (outcome.passed, outcome.description) == (
        True,
        "0 of 1 verdicts are infrastructure (bound 0.00%); none to verify again",
    )


@pytest.mark.parametrize(
    ("nothing_generated", "passed", "said"),
    [
        (True, True, "0 rows: the batch was empty, nothing to verify"),
        (False, False, "0 rows: nothing was verified"),
    ],
)
def test_no_verdicts_pass_only_when_nothing_was_generated(
    tmp_path, nothing_generated, passed, said
):
    verdicts = tmp_path / "v.jsonl"
    publish_records(verdicts, [])
    outcome = check_infrastructure_share(verdicts, 0.5, nothing_generated=nothing_generated)
    assert (outcome.passed, outcome.description) == (passed, said)
    assert outcome.metadata == {"infrastructure": 0, "rows": 0, "bound": 0.5}


def test_an_empty_verdict_file_passes_within_bound_only_beside_an_empty_generation_file(tmp_path):
    empty, verdicts = tmp_path / "g0.jsonl", tmp_path / "v.jsonl"
    publish_records(empty, [])
    publish_records(verdicts, [])
    publish_records(generated := tmp_path / "g1.jsonl", [make_generation()])
    assert check_infrastructure_within_bound(empty, verdicts, 0.01).passed
    refused = check_infrastructure_within_bound(generated, verdicts, 0.01)
    assert (refused.passed, refused.description) == (False, "0 rows: nothing was verified")


def test_at_most_five_differing_identities_are_listed_all_are_counted(tmp_path):
    files = []
    for i in range(6):
        publish_records(
            path := tmp_path / f"v{i}.jsonl",
            [make_verification(make_generation(f"p{i}"), pins=make_pins(repl_rev=f"rev{i}"))],
        )
        files.append(path)
    outcome = check_verifier_identical(files)
    assert outcome.description == "6 distinct verifier identities across 6 verdict files"
    assert len(outcome.metadata["identities"]) == 5


def test_by_default_no_verdicts_never_pass(tmp_path):
    verdicts = tmp_path / "v.jsonl"
    publish_records(verdicts, [])
    assert not check_infrastructure_share(verdicts, 1.0).passed


def elaboration(problem_id: str, rank: int, status: str) -> Elaboration:
    return Elaboration(
        problem_id=problem_id,
        rank=rank,
        status=ElaborationStatus(status),
        errors=[],
        verify_s=0.1,
    )


# statuses of an eval set's references -> (passes, the reference_invalid it names), by hand
@pytest.mark.parametrize(
    ("statuses", "passes", "invalid"),
    [
        (["elaborated", "elaborated"], True, []),
        (["elaborated", "error"], False, ["p1"]),
        (["timeout", "elaborated", "infrastructure"], False, ["p0", "p2"]),
    ],
)
def test_every_reference_must_elaborate_and_those_that_do_not_are_named(
    tmp_path, statuses, passes, invalid
):
    path = tmp_path / "reference_elaboration.jsonl"
    rows = [elaboration(f"p{i}", i, status) for i, status in enumerate(statuses)]
    publish_records(path, rows)
    outcome = check_references_elaborate(path)
    assert outcome.passed is passes
    assert outcome.metadata["reference_invalid"] == invalid
    assert outcome.description == f"{len(statuses) - len(invalid)} of {len(statuses)} elaborate"


def test_the_unelaborated_references_named_are_the_first_fifty(tmp_path):
    path = tmp_path / "reference_elaboration.jsonl"
    publish_records(path, [elaboration(f"p{i:02d}", i, "error") for i in range(60)])
    outcome = check_references_elaborate(path)
    assert outcome.metadata["reference_invalid"] == [f"p{i:02d}" for i in range(50)]
    assert outcome.description == "0 of 60 elaborate"
