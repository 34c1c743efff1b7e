"""A content-addressed verdict cache: the same proof of the same statement, judged by the same
verifier, is verified once.

The key is the sha256 of everything a final verdict depends on: the verifier's pins, its whole
config (policy and backend: budget, gate, statement check, feedback, ...), the trusted
statement's text and the code's sha256. Only final verdicts are stored: a `timeout` depends on
the host's load and an `infrastructure` fault on the host, so neither is ever reused. An entry
is one file, `<root>/<key[:2]>/<key>.json`, published atomically; reading it re-derives the key
from the inputs the entry records, so an entry of other pins or another config, or one whose
bytes changed, is refused (counted, and the proof verified afresh), never used.

A reuse is recorded in the verdict (`cached_from`: the key and the sample whose verdict it
copies), so every copied verdict points at the one that was measured.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prover_assets.records import CachedFrom, SampleKey, Stage, Verification, VerifierInfo
from prover_assets.records.hashing import sha256_text
from prover_assets.records.store import publish_text

__all__ = ["CACHEABLE_STAGES", "VERDICT_CACHE_DIR", "VerdictCache", "cache_key", "copy_for"]

log = logging.getLogger(__name__)

VERDICT_CACHE_DIR = "verdict_cache"  # under the data root

# Verdicts that any later run of the same verifier would reach again.
CACHEABLE_STAGES = frozenset(
    {
        Stage.ACCEPTED,
        Stage.COMPILE_ERROR,
        Stage.INCOMPLETE,
        Stage.AXIOM,
        Stage.STATEMENT_CHANGED,
        # Confirmed on a REPL no other job ran on: the proof's own code printed it, and would
        # again; a cached verdict is also one try less for a forger.
        Stage.FORGED_OUTPUT,
    }
)


# Config that shapes how fast verdicts come, not what they are (timeouts are never stored).
_NOT_VERDICT_CONFIG = frozenset({"workers"})


def _inputs(verifier: VerifierInfo, statement: str, code_sha256: str) -> dict[str, Any]:
    config = {k: v for k, v in verifier.config.items() if k not in _NOT_VERDICT_CONFIG}
    return {
        "pins": verifier.pins.model_dump(mode="json"),
        "config": config,
        "statement_sha256": sha256_text(statement),
        "code_sha256": code_sha256,
    }


def _digest(inputs: dict[str, Any]) -> str:
    text = json.dumps(inputs, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return sha256_text(text)


def cache_key(verifier: VerifierInfo, statement: str, code_sha256: str) -> str:
    """The cache key of `code_sha256` proving `statement` under `verifier`."""
    return _digest(_inputs(verifier, statement, code_sha256))


@dataclass
class VerdictCache:
    """Final verdicts by key, in files under `root`; counts what it served and refused."""

    root: Path
    hits: int = 0
    refused: int = 0

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, verifier: VerifierInfo, statement: str) -> Verification | None:
        """The cached verdict of `key`, or None; an entry that is not exactly this key's (other
        inputs, changed bytes, not a verdict) is refused and logged."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            verdict = Verification.model_validate_json(json.dumps(entry["verdict"]))
            inputs = _inputs(verifier, statement, verdict.code_sha256)
            valid = (
                entry.get("key") == key
                and entry.get("inputs") == inputs
                and _digest(inputs) == key
                and verdict.stage in CACHEABLE_STAGES
            )
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            valid, reason = False, f"{type(exc).__name__}: {exc}"
        else:
            reason = "its inputs are not this key's"
        if not valid:
            self.refused += 1
            log.warning("verdict cache: refused %s (%s); verifying afresh", path, reason[:200])
            return None
        self.hits += 1
        return verdict

    def put(self, key: str, verdict: Verification, statement: str) -> None:
        """Store a final verdict under `key` (timeouts and infrastructure are never stored)."""
        if verdict.stage not in CACHEABLE_STAGES or verdict.copied:
            return
        inputs = _inputs(verdict.verifier, statement, verdict.code_sha256)
        if _digest(inputs) != key:
            raise ValueError(f"verdict cache: {verdict.key} is not the verdict of key {key}")
        entry = {"key": key, "inputs": inputs, "verdict": verdict.model_dump(mode="json")}
        # Two runs storing the same key at once store the same verdict: either rename wins.
        with contextlib.suppress(FileNotFoundError):
            publish_text(self.path(key), json.dumps(entry, ensure_ascii=False) + "\n")


def copy_for(of: Verification, sample: SampleKey, key: str, verifier: VerifierInfo) -> Verification:
    """`of`'s verdict as the verdict of `sample` (same code, same statement), judged by
    `verifier` (pins and config equal by the key; the worker count may differ), pointing at
    `of`."""
    pointer = CachedFrom(
        key=key,
        problem_id=of.problem_id,
        sample_idx=of.sample_idx,
        round=of.round,
        cap_tokens=of.cap_tokens,
    )
    return of.model_copy(
        update={
            "problem_id": sample.problem_id,
            "sample_idx": sample.sample_idx,
            "round": sample.round,
            "cap_tokens": sample.cap_tokens,
            "verifier": verifier,
            "cached_from": pointer,
        }
    )
