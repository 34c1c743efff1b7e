"""Validity checks of verdict files, as plain functions over them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from prover_assets.records import (
    Generation,
    Pins,
    Stage,
    Verification,
    VerifierInfo,
    iter_records,
    read_records,
)
from prover_assets.records.validity import CheckOutcome
from prover_assets.verify.elaboration import Elaboration, ElaborationStatus
from prover_assets.verify.runner import CommitChunk, chunk_died

__all__ = [
    "ComparedConfig",
    "VerifierIdentity",
    "check_chunks",
    "check_infrastructure_share",
    "check_no_length_capped_accepted",
    "check_references_elaborate",
    "check_verdicts_cover_generations",
    "check_verifier_identical",
    "distinct_identities",
    "verdict_identity",
]


class ComparedConfig(BaseModel):
    """The verifier configuration that must be identical for two verdict files to be
    comparable: budget and policy. Worker count, command paths and recycling do not change a
    verdict, so they are not here. None: the verdicts' verifier did not record the field (a
    remote server has no memory cap), which then agrees only with another None."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budget_s: float | None
    feedback: bool | None
    statement_check: str | None
    gate: bool | None
    axiom_check: bool | None
    backend: str | None
    memory_cap_mb: int | None
    memory_limit: dict[str, Any] | None  # `lean.memory_cap.describe_memory_limit`
    rules_sha256: str | None
    infrastructure_retries: int | None
    sandbox: dict[str, Any] | None  # the backend's containment record


class VerifierIdentity(BaseModel):
    """The part of a verifier's description that must agree between verdicts that are
    compared: its pins and its compared configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pins: Pins
    config: ComparedConfig

    @property
    def key(self) -> str:
        """Canonical JSON of the identity: equal exactly when the identities are (a model with
        a dict field has no hash)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    def differences(self, other: VerifierIdentity) -> list[str]:
        """`name ours, theirs` for each pin or compared field that differs from `other`'s."""
        return [
            f"{name} {getattr(ours, name)}, {getattr(theirs, name)}"
            for ours, theirs in ((self.pins, other.pins), (self.config, other.config))
            for name in type(ours).model_fields
            if getattr(ours, name) != getattr(theirs, name)
        ]


def verdict_identity(info: VerifierInfo) -> VerifierIdentity:
    """The identity of the verifier `info` describes (what compared verdicts must share)."""
    compared = {name: info.config.get(name) for name in ComparedConfig.model_fields}
    return VerifierIdentity(pins=info.pins, config=ComparedConfig(**compared))


def distinct_identities(verdicts: Iterable[Verification]) -> dict[str, VerifierIdentity]:
    """Each distinct verifier identity of `verdicts`, by its key."""
    identities = (verdict_identity(v.verifier) for v in verdicts)
    return {identity.key: identity for identity in identities}


def check_verifier_identical(paths: Sequence[Path]) -> CheckOutcome:
    """Pins, verifier config and budget identical across every row of these verdict files."""
    identities: dict[str, VerifierIdentity] = {}
    for path in paths:
        identities.update(distinct_identities(iter_records(path, Verification)))
    return CheckOutcome(
        len(identities) <= 1,
        f"{len(identities)} distinct verifier identities across {len(paths)} verdict files",
        {"identities": [i.model_dump(mode="json") for i in identities.values()][:5]},
    )


def check_verdicts_cover_generations(generations: Path, verdicts: Path) -> CheckOutcome:
    """No verdict without a generation, and one verdict for every generation."""
    generation_keys = {g.key for g in iter_records(generations, Generation)}
    verdict_keys = {v.key for v in iter_records(verdicts, Verification)}
    orphans = sorted(verdict_keys - generation_keys)
    unjudged = sorted(generation_keys - verdict_keys)
    return CheckOutcome(
        not orphans and not unjudged,
        f"{len(orphans)} verdicts without a generation, {len(unjudged)} generations without a verdict",
        {"orphans": [list(k) for k in orphans[:20]], "unjudged": [list(k) for k in unjudged[:20]]},
    )


def check_no_length_capped_accepted(generations: Path, verdicts: Path) -> CheckOutcome:
    """No sample cut off by its token cap is accepted."""
    capped = {g.key for g in iter_records(generations, Generation) if g.hit_cap}
    accepted = [
        v.key for v in iter_records(verdicts, Verification) if v.accepted and v.key in capped
    ]
    return CheckOutcome(
        not accepted,
        f"{len(accepted)} length-capped samples accepted ({len(capped)} capped)",
        {"accepted_capped": [list(k) for k in accepted[:20]]},
    )


def check_chunks(chunks: Path) -> CheckOutcome:
    """No committed chunk in which more than half the samples died for infrastructure reasons."""
    records = list(iter_records(chunks, CommitChunk)) if chunks.exists() else []
    bad = [c.index for c in records if chunk_died(c.samples, c.infrastructure)]
    dead = sum(c.infrastructure for c in records)
    return CheckOutcome(
        not bad,
        f"{len(records)} chunks, {dead} infrastructure failures, {len(bad)} chunks over half dead",
        {"bad_chunks": bad[:20], "infrastructure": dead},
    )


def check_infrastructure_share(
    verdicts: Path, bound: float, *, nothing_generated: bool = False
) -> CheckOutcome:
    """At most `bound` of the verdicts may still be `infrastructure` (a validity condition:
    they are no judgement of the proof, and a resume verifies them again). No rows never pass,
    unless `nothing_generated`: an empty batch the config allowed has nothing to verify."""
    rows = [v.stage for v in iter_records(verdicts, Verification)]
    dead = sum(stage is Stage.INFRASTRUCTURE for stage in rows)
    share = dead / len(rows) if rows else None
    empty = (
        "0 rows: the batch was empty, nothing to verify"
        if nothing_generated
        else ("0 rows: nothing was verified")
    )
    return CheckOutcome(
        share <= bound if share is not None else nothing_generated,
        f"{dead} of {len(rows)} verdicts are infrastructure (bound {bound:.2%}); "
        + ("re-run the asset to verify them again" if dead else "none to verify again")
        if rows
        else empty,
        {"infrastructure": dead, "rows": len(rows), "bound": bound},
    )


def check_infrastructure_within_bound(
    generations: Path, verdicts: Path, bound: float
) -> CheckOutcome:
    """`check_infrastructure_share` of a verdict asset, an empty batch told by its generations
    (the generation step refuses one the config does not allow)."""
    nothing_generated = next(iter(iter_records(generations, Generation)), None) is None
    return check_infrastructure_share(verdicts, bound, nothing_generated=nothing_generated)


def check_references_elaborate(elaborations: Path) -> CheckOutcome:
    """Every problem of an eval set elaborates as `theorem _ref <signature> := by sorry`; one
    that does not (Lean's error, a timeout, a dead worker) is reference_invalid."""
    results = read_records(elaborations, Elaboration)
    invalid = [r.problem_id for r in results if r.status is not ElaborationStatus.ELABORATED]
    return CheckOutcome(
        not invalid,
        f"{len(results) - len(invalid)} of {len(results)} elaborate",
        {"reference_invalid": invalid[:50]},
    )
