"""The SFT builder: which accepted samples become training rows, every rule counted.

Each generation of the pool rounds is a candidate; it is dropped by the first rule it fails,
in this order, and counted under that rule:
  other_cap -> not_accepted -> statement_not_faithful -> no_eos -> too_long -> solved_all
  -> duplicate_proof -> over_max
so that candidates = written + every drop. Some inputs are refused outright (they raise): a
stale or missing verdict, a generation of a problem outside the pool, a pool problem whose
statement is in an evaluation set, a correction whose parent was accepted.

Rows are `prompt_ids + completion_ids` exactly as sampled (never re-tokenised), and are read
back through the trainer's own dataset and collate path after writing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from prover_assets.config import SftSpec
from prover_assets.generation.groups import ProblemGroup, problem_groups
from prover_assets.lean.extract import displayed_theorem
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.records import (
    Generation,
    Problem,
    SftRow,
    Verification,
    code_sha256,
    iter_records,
)
from prover_assets.records.staleness import StaleVerdictError
from prover_assets.records.validity import CheckOutcome, CountsError
from prover_assets.sft.shards import IGNORE_INDEX, SftDataset, ShardWriter, pack

__all__ = [
    "DROP_REASONS",
    "BuiltRow",
    "SftBuild",
    "SftCounts",
    "SftInputError",
    "build_sft",
    "proof_sha",
    "read_back",
]

DROP_REASONS = (
    "other_cap",
    "not_accepted",
    "statement_not_faithful",
    "no_eos",
    "too_long",
    "solved_all",
    "duplicate_proof",
    "over_max",
)


class SftInputError(ValueError):
    """An input the builder refuses: it would make training data that must not exist."""


def proof_sha(code: str) -> str:
    """The sha256 of a proof's code as displayed, comments and layout aside (distinct proofs
    per problem are distinct by it)."""
    return displayed_theorem(code).proof_sha


@dataclass
class BuiltRow:
    """One SFT row before it is written: its sample, tokens, mask and kind."""

    problem_id: str
    round: int
    sample_idx: int
    cap_tokens: int
    prompt_ids: np.ndarray  # uint32, exactly as sampled
    completion_ids: np.ndarray
    proof_sha: str
    model_rev: str

    def write_to(self, writer: ShardWriter) -> None:
        writer.write(
            np.concatenate([self.prompt_ids, self.completion_ids]),
            prompt_len=len(self.prompt_ids),
            kind="first" if self.round == 0 else "correction",
            round=self.round,
            sample_idx=self.sample_idx,
            cap_tokens=self.cap_tokens,
            proof_sha=self.proof_sha,
            model_rev=self.model_rev,
            problem_id=self.problem_id,
        )

    def to_row(self) -> SftRow:
        input_ids = np.concatenate([self.prompt_ids, self.completion_ids]).astype(np.int64).tolist()
        return SftRow(
            input_ids=input_ids,
            prompt_len=len(self.prompt_ids),
            kind="first" if self.round == 0 else "correction",
            round=self.round,
            sample_idx=self.sample_idx,
            cap_tokens=self.cap_tokens,
            n_completion=len(self.completion_ids),
            proof_sha=self.proof_sha,
            model_rev=self.model_rev,
            problem_id=self.problem_id,
        )


class SftCounts(BaseModel):
    """Where every candidate sample went: written, or dropped by one rule (`DROP_REASONS`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    candidates: int
    written: int
    drops: dict[str, int]
    problems_with_rows: int
    tokens: int  # prompt + completion tokens of the written rows
    kinds: dict[str, int]  # first-round and correction rows

    def reconciles(self) -> bool:
        """candidates = written + every drop."""
        return self.candidates == self.written + sum(self.drops.values())


@dataclass
class SftBuild:
    """The SFT rows and where every candidate sample went."""

    rows: list[BuiltRow]
    counts: SftCounts


def _refuse_eval_leaks(pool: Sequence[Problem], sets: DecontaminationSets) -> None:
    leaks = [
        p.problem_id
        for p in pool
        if p.statement_sha in sets.statement_shas or p.alpha_sha in sets.alpha_shas
    ]
    if leaks:
        raise SftInputError(f"pool problems share a statement with an evaluation set: {leaks[:5]}")


def build_sft(
    generation_files: Iterable[Path],
    verdict_files: Iterable[Path],
    pool: Sequence[Problem],
    sets: DecontaminationSets,
    *,
    spec: SftSpec,
    samples_per_problem: int,
    eos_ids: set[int],
) -> SftBuild:
    """The SFT rows from the pool rounds' accepted samples, by the rules of `spec`; every drop
    counted."""
    _refuse_eval_leaks(pool, sets)
    problems = {p.problem_id: p for p in pool}
    verdicts: dict[tuple, Verification] = {}
    for path in verdict_files:
        for verdict in iter_records(path, Verification):
            verdicts[verdict.key] = verdict
    outcomes = problem_groups(
        verdicts.keys(), verdicts, samples_per_problem=samples_per_problem, round=0
    )
    drops = dict.fromkeys(DROP_REASONS, 0)
    candidates = 0
    seen: set[tuple] = set()
    eligible: dict[str, list[BuiltRow]] = defaultdict(list)
    for path in generation_files:
        for generation in iter_records(path, Generation):
            key = generation.key
            seen.add(key)
            problem = problems.get(generation.problem_id)
            if problem is None:
                raise SftInputError(
                    f"{path}: generation {key} is of a problem outside the train pool"
                )
            verdict = verdicts.get(key)
            if verdict is None:
                raise StaleVerdictError(f"{path}: generation {key} has no verdict")
            if verdict.code_sha256 != code_sha256(generation.lean_code):
                raise StaleVerdictError(
                    f"verdict {key} judged other code than the generation in {path}"
                )
            candidates += 1
            reason, proof = _drop_reason(generation, verdict, verdicts, outcomes, spec, eos_ids)
            if reason is not None:
                drops[reason] += 1
                continue
            eligible[generation.problem_id].append(_built_row(generation, proof))
    orphans = sorted(set(verdicts) - seen)
    if orphans:
        raise StaleVerdictError(f"{len(orphans)} verdicts have no generation (e.g. {orphans[0]})")
    rows: list[BuiltRow] = []
    for problem in pool:
        rows += _select(eligible.get(problem.problem_id, []), spec, drops)
    counts = _build_counts(rows, candidates, drops)
    if not counts.reconciles():
        raise CountsError(f"SFT counts do not reconcile: {counts}")
    return SftBuild(rows=rows, counts=counts)


def _built_row(generation: Generation, proof: str) -> BuiltRow:
    return BuiltRow(
        problem_id=generation.problem_id,
        round=generation.round,
        sample_idx=generation.sample_idx,
        cap_tokens=generation.cap_tokens,
        prompt_ids=np.asarray(generation.prompt_ids, np.uint32),
        completion_ids=np.asarray(generation.completion_ids, np.uint32),
        proof_sha=proof,
        model_rev=generation.model_rev,
    )


def _build_counts(rows: list[BuiltRow], candidates: int, drops: dict[str, int]) -> SftCounts:
    """Where the candidates went (written + each drop reason), and what was written."""
    return SftCounts(
        candidates=candidates,
        written=len(rows),
        drops=drops,
        problems_with_rows=len({row.problem_id for row in rows}),
        tokens=int(sum(len(r.prompt_ids) + len(r.completion_ids) for r in rows)),
        kinds={
            "first": sum(r.round == 0 for r in rows),
            "correction": sum(r.round > 0 for r in rows),
        },
    )


def _displayed_faithful(verdict: Verification) -> bool:
    """The verifier's reading of the displayed theorem, as its verdict records it."""
    faithful = verdict.displayed_statement_faithful
    if faithful is None:
        raise StaleVerdictError(
            f"accepted verdict {verdict.key} does not record whether its displayed theorem is the "
            "problem's (displayed_statement_faithful): verify its batch again"
        )
    return faithful


def _drop_reason(
    generation: Generation,
    verdict: Verification,
    verdicts: dict[tuple, Verification],
    outcomes: dict,
    spec: SftSpec,
    eos_ids: set[int],
) -> tuple[str | None, str]:
    """The first rule the sample fails (None if it passes them all), and its proof's sha."""
    if generation.cap_tokens != spec.cap:
        return "other_cap", ""
    if not verdict.accepted:
        return "not_accepted", ""
    if generation.parent is not None:
        parent = verdicts.get(generation.parent.key)
        if parent is not None and parent.accepted:
            raise SftInputError(
                f"correction {generation.key} has an accepted parent; corrections exist "
                "only for failed samples"
            )
    proof = proof_sha(generation.lean_code or "")
    if not _displayed_faithful(verdict):
        return "statement_not_faithful", proof
    if not generation.completion_ids or generation.completion_ids[-1] not in eos_ids:
        return "no_eos", proof
    if len(generation.prompt_ids) + len(generation.completion_ids) > spec.max_seq_len:
        return "too_long", proof
    outcome = outcomes.get(generation.problem_id)
    if (
        spec.exclude_solved_all
        and outcome is not None
        and outcome.group is ProblemGroup.ALL_CORRECT
    ):
        return "solved_all", proof
    return None, proof


def _select(eligible: list[BuiltRow], spec: SftSpec, drops: dict[str, int]) -> list[BuiltRow]:
    """Distinct proofs first, in (round, sample_idx) order, at most `max_per_problem`; with
    `fill_duplicates`, repeated proofs fill what is left."""
    selected: list[BuiltRow] = []
    repeats: list[BuiltRow] = []
    proofs: set[str] = set()
    for row in sorted(eligible, key=lambda r: (r.round, r.sample_idx)):
        if row.proof_sha in proofs:
            if spec.fill_duplicates:
                repeats.append(row)
            else:
                drops["duplicate_proof"] += 1
        elif len(selected) >= spec.max_per_problem:
            drops["over_max"] += 1
        else:
            selected.append(row)
            proofs.add(row.proof_sha)
    while repeats and len(selected) < spec.max_per_problem:
        selected.append(repeats.pop(0))
    drops["over_max"] += len(repeats)
    return selected


def read_back(folder: Path, rows: Sequence[BuiltRow]) -> CheckOutcome:
    """Every written row, read through the trainer's dataset and collate, token by token: the
    context is its prompt_ids, the tokens with loss are its completion_ids, none in the prompt."""
    dataset = SftDataset(folder)
    problems: list[str] = []
    if len(dataset) != len(rows):
        problems.append(f"{len(dataset)} rows on disk, {len(rows)} built")
    for i, row in enumerate(rows[: len(dataset)]):
        batch = pack(dataset, [i])
        prompt_len = len(row.prompt_ids)
        context = batch.input_ids[:prompt_len]
        with_loss = batch.labels != IGNORE_INDEX
        if dataset.index[i].prompt_len != prompt_len or not np.array_equal(context, row.prompt_ids):
            problems.append(f"row {i} ({row.problem_id}): context differs from its prompt_ids")
        if with_loss[:prompt_len].any():
            problems.append(f"row {i}: loss on a prompt token")
        if not np.array_equal(batch.labels[with_loss], row.completion_ids):
            problems.append(f"row {i}: tokens with loss differ from its completion_ids")
        if len(problems) >= 20:
            break
    if len(dataset) >= 2:
        pair = pack(dataset, [0, 1])
        if pair.position_ids[pair.spans[1][0]] != 0:
            problems.append("packed rows do not restart their position ids")
    return CheckOutcome(
        not problems,
        f"{len(dataset)} of {len(dataset)} rows read back exactly"
        if not problems
        else "; ".join(problems[:5]),
        {"mismatches": problems[:20]},
    )
