"""The code pin: a verdict is current only while its generation's code hashes to its pin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prover_assets.records.hashing import code_sha256
from prover_assets.records.models import Generation, SampleKey, Verification

__all__ = [
    "StaleVerdictError",
    "current_verdicts",
    "current_verdicts_by_hash",
    "orphans_and_stale_by_hash",
]


class StaleVerdictError(RuntimeError):
    """A verdict judged other code than the generation now on disk, or has no generation."""


def orphans_and_stale_by_hash(
    verdicts: Mapping[SampleKey, Verification], code_shas: Mapping[SampleKey, str]
) -> tuple[list[tuple], list[tuple]]:
    """Keys of verdicts without a generation, and of verdicts whose code hash is not the
    generation's code pin now (`code_shas`)."""
    orphans = [key for key in verdicts if key not in code_shas]
    stale = [
        key for key, v in verdicts.items() if key in code_shas and v.code_sha256 != code_shas[key]
    ]
    return orphans, stale


def current_verdicts(
    generations: Mapping[SampleKey, Generation], verdicts: Iterable[Verification]
) -> dict[SampleKey, Verification]:
    """Verdicts keyed by sample; raises StaleVerdictError on any orphan or stale verdict."""
    return current_verdicts_by_hash(
        {key: code_sha256(g.lean_code) for key, g in generations.items()}, verdicts
    )


def current_verdicts_by_hash(
    code_shas: Mapping[SampleKey, str], verdicts: Iterable[Verification]
) -> dict[SampleKey, Verification]:
    """As `current_verdicts`, from each generation's code hash (no need to hold generations)."""
    keyed = {verdict.key: verdict for verdict in verdicts}
    orphans, stale = orphans_and_stale_by_hash(keyed, code_shas)
    if orphans:
        raise StaleVerdictError(f"{len(orphans)} verdicts have no generation (e.g. {orphans[0]})")
    if stale:
        raise StaleVerdictError(
            f"{len(stale)} verdicts judged other code than the generations now on disk (e.g. {stale[0]})"
        )
    return keyed
