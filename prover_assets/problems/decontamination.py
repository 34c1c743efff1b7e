"""What the training pool must not contain: the scored evaluation problems, in any guise.

Layers, applied in order by the pool builder:
1. the same `statement_sha` (same signature tokens, any theorem name, comments, whitespace);
2. the same `alpha_sha` (also with bound variables and hypotheses renamed);
3. the same normalised name (lowercase alphanumerics), or an evaluation name of at least
   8 characters inside the pool theorem name or problem id;
4. informal text: a shared 13-gram, or at least 3 distinct shared 8-grams, of LaTeX-spacing-
   insensitive tokens; checked separately against ALL MOBench texts (supported or not),
   because the same olympiad problem may be formalised differently.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prover_assets.lean.signature import theorem_signature
from prover_assets.records import Problem

__all__ = [
    "MIN_EMBEDDED_NAME",
    "DecontaminationSets",
    "build_decontamination_sets",
    "informal_tokens",
    "name_matches",
    "ngram_hashes",
    "normalise_name",
]

MIN_EMBEDDED_NAME = 8

# LaTeX spacing and sizing commands that change nothing about the text.
_LATEX_NOISE = re.compile(
    r"\\[,;:! ]|\\(?:quad|qquad|left|right|big|Big|bigg|Bigg|displaystyle|textstyle)\b|~|\$"
)
_INFORMAL_TOKEN = re.compile(r"[a-z0-9]+|\\[a-z]+|[^\sa-z0-9\\]")
_COMMENT_MARKERS = re.compile(r"^\s*/-[-!]?|-/\s*$")


def normalise_name(name: str) -> str:
    """A theorem name as compared: lowercase letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def informal_tokens(text: str) -> list[str]:
    """Lowercase word, number, LaTeX-command and symbol tokens; spacing does not matter."""
    text = _COMMENT_MARKERS.sub(" ", text)
    text = _LATEX_NOISE.sub(" ", text.lower())
    return _INFORMAL_TOKEN.findall(text)


def ngram_hashes(tokens: Sequence[str], n: int) -> set[int]:
    """64-bit hashes of the token n-grams (stable across processes, unlike `hash`)."""
    hashes = set()
    for start in range(len(tokens) - n + 1):
        gram = "\x1f".join(tokens[start : start + n]).encode("utf-8")
        hashes.add(int.from_bytes(hashlib.blake2b(gram, digest_size=8).digest(), "big"))
    return hashes


def name_matches(
    candidate_names: Iterable[str], eval_names: frozenset[str], embedded: re.Pattern[str] | None
) -> bool:
    """Layer 3: a normalised name equal to an evaluation name, or containing a long one."""
    for name in candidate_names:
        normalised = normalise_name(name)
        if not normalised:
            continue
        if normalised in eval_names:
            return True
        if embedded is not None and embedded.search(normalised):
            return True
    return False


@dataclass(frozen=True)
class DecontaminationSets:
    """What the pool must not contain: eval statement hashes (exact and alpha), names, informal
    n-grams."""

    statement_shas: frozenset[str]
    alpha_shas: frozenset[str]
    names: frozenset[str]  # normalised problem ids and theorem names of the scored sets
    long_ngram: int
    short_ngram: int
    scored_long: frozenset[int]  # n-gram hashes of the scored sets' informal texts
    scored_short: frozenset[int]
    mobench_long: frozenset[int]  # of every MOBench informal text, supported or not
    mobench_short: frozenset[int]

    def embedded_pattern(self) -> re.Pattern[str] | None:
        """One alternation of the evaluation names long enough to count when embedded."""
        names = sorted(
            (n for n in self.names if len(n) >= MIN_EMBEDDED_NAME), key=lambda n: (-len(n), n)
        )
        return re.compile("|".join(map(re.escape, names))) if names else None

    def to_json(self) -> dict[str, Any]:
        return {
            "statement_shas": sorted(self.statement_shas),
            "alpha_shas": sorted(self.alpha_shas),
            "names": sorted(self.names),
            "long_ngram": self.long_ngram,
            "short_ngram": self.short_ngram,
            "scored_long": sorted(self.scored_long),
            "scored_short": sorted(self.scored_short),
            "mobench_long": sorted(self.mobench_long),
            "mobench_short": sorted(self.mobench_short),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DecontaminationSets:
        return cls(
            statement_shas=frozenset(data["statement_shas"]),
            alpha_shas=frozenset(data["alpha_shas"]),
            names=frozenset(data["names"]),
            long_ngram=int(data["long_ngram"]),
            short_ngram=int(data["short_ngram"]),
            scored_long=frozenset(data["scored_long"]),
            scored_short=frozenset(data["scored_short"]),
            mobench_long=frozenset(data["mobench_long"]),
            mobench_short=frozenset(data["mobench_short"]),
        )


def _ngrams_of(texts: Iterable[str], n: int) -> frozenset[int]:
    hashes: set[int] = set()
    for text in texts:
        hashes |= ngram_hashes(informal_tokens(text), n)
    return frozenset(hashes)


def build_decontamination_sets(
    scored: Iterable[Problem],
    mobench_informal: Iterable[str],
    *,
    long_ngram: int,
    short_ngram: int,
) -> DecontaminationSets:
    """The sets from the scored evaluation problems and every MOBench informal text."""
    scored = list(scored)
    mobench_informal = list(mobench_informal)
    names = set()
    for problem in scored:
        names.add(normalise_name(problem.problem_id))
        signature = theorem_signature(problem.formal_statement)
        if signature is not None:
            names.add(normalise_name(signature.name))
    informal = [problem.informal_prefix for problem in scored]
    return DecontaminationSets(
        statement_shas=frozenset(problem.statement_sha for problem in scored),
        alpha_shas=frozenset(problem.alpha_sha for problem in scored),
        names=frozenset(name for name in names if name),
        long_ngram=long_ngram,
        short_ngram=short_ngram,
        scored_long=_ngrams_of(informal, long_ngram),
        scored_short=_ngrams_of(informal, short_ngram),
        mobench_long=_ngrams_of(mobench_informal, long_ngram),
        mobench_short=_ngrams_of(mobench_informal, short_ngram),
    )
