"""The SFT builder against hand-built truth tables: every rule counted or refused."""

import numpy as np
import pytest

from prover_assets.config import SftSpec
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.records import ParentRef, VerdictDiagnostics, publish_records
from prover_assets.records.staleness import StaleVerdictError
from prover_assets.sft.builder import SftInputError, build_sft, proof_sha, read_back
from prover_assets.sft.shards import SftDataset, ShardWriter, pack
from prover_assets_tests.factories import (
    make_generation,
    make_problem,
    make_verification,
)

EOS = 99
SIGNATURE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by"


def sets(statement_shas=(), alpha_shas=()) -> DecontaminationSets:
    return DecontaminationSets(
        frozenset(statement_shas),
        frozenset(alpha_shas),
        frozenset(),
        13,
        8,
        frozenset(),
        frozenset(),
        frozenset(),
        frozenset(),
    )


def spec(**overrides) -> SftSpec:
    fields = {
        "cap": 64,
        "max_per_problem": 2,
        "exclude_solved_all": True,
        "fill_duplicates": False,
        "max_seq_len": 40,
    }
    fields.update(overrides)
    return SftSpec(**fields)


def sample(
    problem_id,
    idx,
    *,
    tactic="omega",
    accepted=True,
    eos=True,
    length=3,
    cap=64,
    round=0,
    parent=None,
    signature=SIGNATURE,
):
    completion = f"```lean4\n{signature}\n  {tactic}\n```"
    ids = [5] * (length - 1) + [EOS if eos else 6]
    generation = make_generation(
        problem_id,
        idx,
        round=round,
        cap_tokens=cap,
        completion_ids=ids,
        completion_text=completion,
        parent=parent,
    )
    # The verifier's reading, by hand: the displayed theorem is the problem's iff it is SIGNATURE.
    verdict = make_verification(
        generation,
        accepted=accepted,
        diagnostics={"displayed_statement_faithful": signature == SIGNATURE},
    )
    return generation, verdict


def build(tmp_path, rows, *, problems=("p1", "p2"), sft=None, n=2, leak=()):
    generations, verdicts = zip(*rows, strict=True) if rows else ((), ())
    publish_records(tmp_path / "gen.jsonl", generations)
    publish_records(tmp_path / "ver.jsonl", verdicts)
    pool = [make_problem(pid) for pid in problems]
    return build_sft(
        [tmp_path / "gen.jsonl"],
        [tmp_path / "ver.jsonl"],
        pool,
        sets(leak),
        spec=sft or spec(),
        samples_per_problem=n,
        eos_ids={EOS},
    )


def test_truth_table_every_rule_counted(tmp_path):
    rows = [
        sample("p1", 0, tactic="omega"),  # written
        sample("p1", 1, tactic="simp"),  # written (distinct proof)
        sample("p1", 2, tactic="linarith"),  # over max (max 2)
        sample("p1", 3, tactic="omega"),  # duplicate proof of sample 0
        sample("p2", 0, accepted=False),  # not accepted
        sample("p2", 1, eos=False),  # no EOS
        sample("p2", 2, length=38),  # 3 prompt + 38 > 40: too long
        sample("p2", 3, signature="theorem t (x : ℕ) (h₀ : 0 < x) : 0 ≤ x + 1 := by"),  # unfaithful
        sample("p2", 4, cap=128),  # other cap
    ]
    result = build(tmp_path, rows, n=8)  # no problem has all 8 samples: none solved n/n
    counts = result.counts
    assert counts.drops == {
        "other_cap": 1,
        "not_accepted": 1,
        "statement_not_faithful": 1,
        "no_eos": 1,
        "too_long": 1,
        "solved_all": 0,
        "duplicate_proof": 1,
        "over_max": 1,
    }
    assert (counts.candidates, counts.written) == (9, 2)
    assert [(r.problem_id, r.sample_idx) for r in result.rows] == [("p1", 0), ("p1", 1)]


def test_faithfulness_is_the_verdicts_reading_not_a_second_one(tmp_path):
    generation, verdict = sample("p1", 0)  # displays the problem's theorem
    told_unfaithful = verdict.model_copy(
        update={"diagnostics": VerdictDiagnostics(displayed_statement_faithful=False)}
    )
    result = build(tmp_path, [(generation, told_unfaithful)])
    assert result.counts.drops["statement_not_faithful"] == 1 and result.rows == []


def test_an_accepted_verdict_without_the_faithfulness_reading_is_refused(tmp_path):
    generation, verdict = sample("p1", 0)
    unread = verdict.model_copy(update={"diagnostics": VerdictDiagnostics()})
    with pytest.raises(
        StaleVerdictError,
        match=r"the problem's \(displayed_statement_faithful\): verify its batch again$",
    ):
        build(tmp_path, [(generation, unread)])


def test_rows_are_prompt_plus_completion_exactly_as_sampled(tmp_path):
    generation, verdict = sample("p1", 0)
    (row,) = build(tmp_path, [(generation, verdict)]).rows
    record = row.to_row()
    assert record.input_ids == generation.prompt_ids + generation.completion_ids
    assert (record.prompt_len, record.n_completion, record.kind) == (3, 3, "first")


def test_problem_solved_n_of_n_is_excluded_but_not_one_with_fewer_samples(tmp_path):
    rows = [
        sample("p1", 0, tactic="omega"),
        sample("p1", 1, tactic="simp"),  # solved 2/2
        sample("p2", 0, tactic="omega"),
    ]  # only 1 of n=2 samples: invalid, never "solved n/n"
    result = build(tmp_path, rows)
    assert result.counts.drops["solved_all"] == 2
    assert [r.problem_id for r in result.rows] == ["p2"]


def test_fill_duplicates_repeats_proofs_up_to_the_maximum(tmp_path):
    rows = [sample("p1", i, tactic="omega", accepted=i < 3) for i in range(4)]
    result = build(tmp_path, rows, sft=spec(fill_duplicates=True, max_per_problem=2), n=4)
    assert [r.sample_idx for r in result.rows] == [0, 1]
    assert result.counts.drops["over_max"] == 1


def test_accepted_correction_of_a_failed_parent_is_a_correction_row(tmp_path):
    parent = sample("p1", 0, accepted=False)
    child = sample(
        "p1",
        0,
        round=1,
        tactic="simp",
        parent=ParentRef(problem_id="p1", sample_idx=0, round=0, cap_tokens=64),
    )
    (row,) = build(tmp_path, [parent, child], n=1).rows
    assert (row.round, row.to_row().kind) == (1, "correction")


def test_correction_of_an_accepted_parent_is_refused(tmp_path):
    parent = sample("p1", 0, accepted=True)
    child = sample(
        "p1", 0, round=1, parent=ParentRef(problem_id="p1", sample_idx=0, round=0, cap_tokens=64)
    )
    with pytest.raises(SftInputError, match="accepted parent"):
        build(tmp_path, [parent, child], n=1, sft=spec(exclude_solved_all=False))


def test_stale_verdict_raises(tmp_path):
    generation, _ = sample("p1", 0, tactic="omega")
    _, verdict = sample("p1", 0, tactic="simp")
    with pytest.raises(StaleVerdictError, match="judged other code"):
        build(tmp_path, [(generation, verdict)])


def test_generation_outside_the_pool_is_refused(tmp_path):
    with pytest.raises(SftInputError, match="outside the train pool"):
        build(tmp_path, [sample("stranger", 0)])


def test_pool_problem_with_an_evaluation_statement_is_refused(tmp_path):
    with pytest.raises(SftInputError, match="share a statement with an evaluation set"):
        build(tmp_path, [sample("p1", 0)], leak=[make_problem().statement_sha])


def test_empty_input_builds_no_rows(tmp_path):
    result = build(tmp_path, [])
    assert (result.counts.candidates, result.counts.written) == (0, 0)


def test_proof_sha_ignores_comments_and_whitespace_but_not_tactics():
    one = GOEDEL_HEADER + SIGNATURE + "\n  omega -- done"
    two = GOEDEL_HEADER + SIGNATURE + "\n\n    omega"
    three = GOEDEL_HEADER + SIGNATURE + "\n  simp"
    assert proof_sha(one) == proof_sha(two) != proof_sha(three)


def write(tmp_path, result):
    writer = ShardWriter(tmp_path / "shards")
    for row in result.rows:
        row.write_to(writer)
    writer.close()
    return tmp_path / "shards"


def test_read_back_passes_on_written_rows_and_fails_on_a_flipped_token(tmp_path):
    result = build(tmp_path, [sample("p1", 0, tactic="omega"), sample("p1", 1, tactic="simp")], n=4)
    folder = write(tmp_path, result)
    assert read_back(folder, result.rows).passed
    tokens = np.fromfile(folder / "tokens-00000.bin", dtype=np.uint32)
    tokens[4] += 1  # a completion token
    tokens.tofile(folder / "tokens-00000.bin")
    outcome = read_back(folder, result.rows)
    assert not outcome.passed
    assert "tokens with loss differ" in outcome.description


def test_packing_restarts_positions_and_masks_every_prompt(tmp_path):
    result = build(
        tmp_path,
        [sample("p1", 0, tactic="omega", length=4), sample("p1", 1, tactic="simp", length=2)],
        n=4,
    )
    dataset = SftDataset(write(tmp_path, result))
    batch = pack(dataset, [0, 1])
    assert batch.position_ids.tolist() == [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4]
    assert batch.labels.tolist() == [-100, -100, -100, 5, 5, 5, EOS, -100, -100, -100, 5, EOS]
    assert batch.spans == ((0, 7), (7, 12))


def test_dataset_rows_satisfy_the_sft_row_contract(tmp_path):
    result = build(tmp_path, [sample("p1", 0)], n=4)
    (row,) = list(SftDataset(write(tmp_path, result)))
    assert row.input_ids == [1, 2, 3, 5, 5, EOS]
    assert row.problem_id == "p1"
    assert row.model_rev == "0" * 40


def test_every_count_reconciles_with_repeated_drops_of_one_kind(tmp_path):
    parent = ParentRef(problem_id="p2", sample_idx=0, round=0, cap_tokens=64)
    rows = [
        sample("p1", 0, tactic="omega"),  # written
        sample("p1", 1, tactic="simp"),  # written
        sample("p1", 2, tactic="omega"),  # duplicate
        sample("p1", 3, tactic="simp"),  # duplicate
        sample("p1", 4, tactic="linarith"),  # over max
        sample("p1", 5, tactic="nlinarith"),  # over max
        sample("p2", 0, accepted=False),
        sample("p2", 0, round=1, tactic="norm_num", parent=parent, length=37),  # 3 + 37 = 40 fits
    ]
    counts = build(tmp_path, rows, n=8).counts
    assert counts.model_dump() == {
        "candidates": 8,
        "written": 3,
        "drops": {
            "other_cap": 0,
            "not_accepted": 1,
            "statement_not_faithful": 0,
            "no_eos": 0,
            "too_long": 0,
            "solved_all": 0,
            "duplicate_proof": 2,
            "over_max": 2,
        },
        "problems_with_rows": 2,
        "tokens": (3 + 3) + (3 + 3) + (3 + 37),
        "kinds": {"first": 2, "correction": 1},
    }
    assert counts.reconciles()


def build_from(tmp_path, generations, verdicts):
    publish_records(tmp_path / "gen.jsonl", generations)
    publish_records(tmp_path / "ver.jsonl", verdicts)
    return build_sft(
        [tmp_path / "gen.jsonl"],
        [tmp_path / "ver.jsonl"],
        [make_problem("p1")],
        sets(),
        spec=spec(),
        samples_per_problem=2,
        eos_ids={EOS},
    )


def test_a_verdict_without_its_generation_is_named(tmp_path):
    generation, verdict = sample("p1", 0)
    _, orphan = sample("p1", 5)
    with pytest.raises(
        StaleVerdictError, match=r"1 verdicts have no generation \(e\.g\. \('p1', 5"
    ):
        build_from(tmp_path, [generation], [verdict, orphan])


def test_a_generation_without_its_verdict_is_named(tmp_path):
    generation, _ = sample("p1", 0)
    with pytest.raises(StaleVerdictError, match=r"generation \('p1', 0, 0, 64\) has no verdict"):
        build_from(tmp_path, [generation], [])


def test_code_without_a_theorem_or_that_does_not_lex_still_has_a_proof_sha():
    import hashlib

    unlexable = GOEDEL_HEADER + SIGNATURE + "\n  omega /- never closed"
    assert proof_sha(unlexable) == hashlib.sha256(unlexable.encode("utf-8")).hexdigest()
    assert proof_sha(GOEDEL_HEADER + "example : True := trivial") != proof_sha(
        GOEDEL_HEADER + "example : True := by trivial"
    )


def test_a_correction_is_written_to_the_shards_as_a_correction(tmp_path):
    parent = ParentRef(problem_id="p1", sample_idx=0, round=0, cap_tokens=64)
    rows = [sample("p1", 0, accepted=False), sample("p1", 0, round=1, parent=parent)]
    (row,) = list(SftDataset(write(tmp_path, build(tmp_path, rows, n=1))))
    assert (row.kind, row.round) == ("correction", 1)


def test_read_back_of_a_clean_write_says_how_many_rows_it_read(tmp_path):
    result = build(tmp_path, [sample("p1", 0, tactic="omega"), sample("p1", 1, tactic="simp")], n=4)
    outcome = read_back(write(tmp_path, result), result.rows)
    assert (outcome.passed, outcome.description, outcome.metadata) == (
        True,
        "2 of 2 rows read back exactly",
        {"mismatches": []},
    )


def test_read_back_names_a_changed_prompt_token_and_a_missing_row(tmp_path):
    result = build(tmp_path, [sample("p1", 0, tactic="omega"), sample("p1", 1, tactic="simp")], n=4)
    folder = write(tmp_path, result)
    tokens = np.fromfile(folder / "tokens-00000.bin", dtype=np.uint32)
    tokens[1] += 1  # a prompt token of row 0
    tokens.tofile(folder / "tokens-00000.bin")
    outcome = read_back(folder, [*result.rows, result.rows[0]])
    assert not outcome.passed
    assert outcome.metadata["mismatches"] == [
        "2 rows on disk, 3 built",
        "row 0 (p1): context differs from its prompt_ids",
    ]
    assert (
        outcome.description
        == "2 rows on disk, 3 built; row 0 (p1): context differs from its prompt_ids"
    )
