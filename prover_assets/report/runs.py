"""One system's run read back for the report: its files, its problems, what each sample was
and how it was judged, every reading validated before anything is counted.

A run is one system's generations and verdicts on one evaluation set at one cap. A generation
of another problem or cap, a sample without a current verdict, a problem short of samples, or
verdicts of two verifiers are refused here, so the tables and comparisons never see them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from prover_assets.generation.prompts import round0_messages
from prover_assets.records import (
    SAMPLING_FIELDS,
    Generation,
    Problem,
    SampleKey,
    SamplingSettings,
    Verification,
    code_sha256,
    iter_records,
    read_records,
)
from prover_assets.records.manifest import read_manifest
from prover_assets.records.staleness import current_verdicts_by_hash
from prover_assets.report.summary import MadeBy, RunProvenance
from prover_assets.stats import MissingSamplesError
from prover_assets.verify.validity import VerifierIdentity, distinct_identities

__all__ = [
    "ComparisonRefused",
    "RunData",
    "RunFiles",
    "SampleFacts",
    "load_run",
    "run_provenance",
    "sampling_words",
]


class ComparisonRefused(ValueError):
    """The two runs cannot be compared honestly; the message says why."""


@dataclass(frozen=True)
class RunFiles:
    """The files of one system's run on one eval set at one cap."""

    system: str
    eval_set: str
    cap: int
    problems: Path
    generations: Path
    verdicts: Path


@dataclass(frozen=True)
class SampleFacts:
    """What the report reads of one sample's generation (its verdict is read apart)."""

    max_tokens: int  # the effective completion budget
    finish_reason: str
    context_clipped: bool
    design: tuple  # `Generation.design_identity`: what a paired sample must share
    statement_prompt: bool  # its messages are the problem's registered round-0 prompt
    sampling: tuple[float | int | None, ...]  # `Sampling.values`
    model_rev: str
    completion_tokens: int


@dataclass
class RunData:
    """One run read and validated: problems, accepted samples, their facts and verdicts."""

    files: RunFiles
    problems: list[Problem]
    accepted: dict[str, dict[int, bool]]  # problem -> sample_idx -> accepted (round 0)
    samples: dict[SampleKey, SampleFacts]
    verdicts: dict[SampleKey, Verification]
    identity: VerifierIdentity  # the one verifier every verdict came from
    simulated: bool
    simulated_rule: str | None = None  # the simulated verifier's rule in words

    @property
    def sampling(self) -> set[tuple[float | int | None, ...]]:
        """Every distinct sampling of the run's samples (one, in a run that can be compared)."""
        return {facts.sampling for facts in self.samples.values()}

    @property
    def sampling_in_words(self) -> str:
        """The run's samplings in words, `; `-separated (`sampling_words`)."""
        return "; ".join(sampling_words(values) for values in sorted(self.sampling, key=str))

    @property
    def model_revs(self) -> set[str]:
        """Every model revision that sampled the run."""
        return {facts.model_rev for facts in self.samples.values()}


def sampling_words(values: tuple[float | int | None, ...]) -> str:
    """`temperature 1.0, top_p 0.95, top_k none`, then any field that is not neutral (or was
    left to the server: `min_p unset`)."""
    named = dict(zip(SAMPLING_FIELDS, values, strict=True))
    neutral = {f.name: f.default for f in fields(SamplingSettings) if f.default is not MISSING}
    words = []
    for name, value in named.items():
        if value is None:
            words.append(f"{name} unset")
        elif name == "top_k":
            words.append(f"top_k {value or 'none'}")
        elif name in ("temperature", "top_p") or value != neutral[name]:
            words.append(f"{name} {value}")
    return ", ".join(words)


def _sample_facts(generation: Generation, expected_prompt: list) -> SampleFacts:
    return SampleFacts(
        max_tokens=generation.sampling.max_tokens,
        finish_reason=generation.finish_reason,
        context_clipped=generation.context_clipped,
        design=generation.design_identity,
        statement_prompt=generation.messages == expected_prompt,
        sampling=generation.sampling.values,
        model_rev=generation.model_rev,
        completion_tokens=len(generation.completion_ids),
    )


def _read_generations(
    files: RunFiles, problems: list[Problem]
) -> tuple[dict[SampleKey, SampleFacts], dict[SampleKey, str]]:
    """Each generation's facts and code sha256, by key; a generation of another problem or
    at another cap is refused."""
    expected = {p.problem_id: round0_messages(p.formal_statement) for p in problems}
    samples: dict[SampleKey, SampleFacts] = {}
    code_shas: dict[SampleKey, str] = {}
    for generation in iter_records(files.generations, Generation):
        if generation.problem_id not in expected:
            raise ComparisonRefused(
                f"{files.generations}: {generation.key} is not a problem of {files.problems}"
            )
        if generation.cap_tokens != files.cap:
            raise ComparisonRefused(
                f"{files.generations}: {generation.key} has cap {generation.cap_tokens}, "
                f"not {files.cap}: caps are never pooled"
            )
        code_shas[generation.key] = code_sha256(generation.lean_code)
        samples[generation.key] = _sample_facts(generation, expected[generation.problem_id])
    return samples, code_shas


def _accepted_round0(
    files: RunFiles,
    problems: list[Problem],
    verdicts: dict[SampleKey, Verification],
    samples_required: int,
) -> dict[str, dict[int, bool]]:
    """Each problem's round-0 verdicts by sample index; a problem without samples
    0..samples_required-1 is refused (a missing problem is never scored as a failure)."""
    accepted: dict[str, dict[int, bool]] = defaultdict(dict)
    for key, verdict in verdicts.items():
        if key.round == 0:
            accepted[key.problem_id][key.sample_idx] = verdict.accepted
    short = sorted(
        p.problem_id
        for p in problems
        if any(i not in accepted.get(p.problem_id, {}) for i in range(samples_required))
    )
    if short:
        raise MissingSamplesError(
            f"{files.system} on {files.eval_set} at cap {files.cap}: {len(short)} problems lack "
            f"samples 0..{samples_required - 1} (e.g. {short[0]}); missing problems are never "
            "scored as failures"
        )
    return dict(accepted)


def _one_identity(files: RunFiles, verdicts: dict[SampleKey, Verification]) -> VerifierIdentity:
    """The verifier every verdict of the run came from; a run judged by two is refused."""
    identities = distinct_identities(verdicts.values())
    if not identities:
        raise MissingSamplesError(f"{files.verdicts}: no verdicts; an empty run is never scored")
    if len(identities) > 1:
        raise ComparisonRefused(
            f"{files.verdicts}: verdicts from {len(identities)} different verifiers"
        )
    return next(iter(identities.values()))


def load_run(files: RunFiles, *, samples_required: int) -> RunData:
    """Read and validate one run; every problem must have samples 0..samples_required-1."""
    problems = read_records(files.problems, Problem)
    samples, code_shas = _read_generations(files, problems)
    verdicts = current_verdicts_by_hash(code_shas, iter_records(files.verdicts, Verification))
    unjudged = sorted(set(code_shas) - set(verdicts))
    if unjudged:
        raise MissingSamplesError(
            f"{files.verdicts}: {len(unjudged)} samples have no verdict (e.g. {unjudged[0]})"
        )
    accepted = _accepted_round0(files, problems, verdicts, samples_required)
    identity = _one_identity(files, verdicts)
    rules = {v.verifier.config.get("simulated_rule") for v in verdicts.values()} - {None}
    return RunData(
        files,
        problems,
        accepted,
        samples,
        verdicts,
        identity,
        simulated=any(v.verifier.pins.simulated for v in verdicts.values()),
        simulated_rule="; ".join(sorted(rules)) or None,
    )


def run_provenance(files: RunFiles) -> RunProvenance:
    """Which run made the generations and the verdicts, and when: their manifests' record."""

    def made(folder: Path) -> MadeBy:
        manifest = read_manifest(folder)
        return MadeBy(
            run_id=manifest.get("run_id"),
            started_at=manifest["started_at"],
            finished_at=manifest["finished_at"],
        )

    return RunProvenance(
        generations=made(files.generations.parent), verdicts=made(files.verdicts.parent)
    )
