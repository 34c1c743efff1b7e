"""The verifier's identity: what two verdicts must share to be compared, and the check that
every verdict of a set shares it."""

from __future__ import annotations

from prover_assets.records import VerifierInfo, publish_records
from prover_assets.verify.validity import check_verifier_identical, verdict_identity
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
