"""The training pool's candidates: streamed from parquet shards, filtered, decontaminated, ranked.

Every row lands in exactly one bucket, counted in this order: not a bare statement; unsupported
shape; too long; `sorry` not exactly once; decontamination layers 1-3; beyond the K smallest
rank keys; decontamination layer 4 and duplicate statements; written. The rank key is
`sha256(f"{seed}|{problem_id}")`, so the kept set does not depend on row order or sharding, and
a bounded heap keeps memory at O(K) whatever the dataset size.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from prover_assets.config import PoolSpec
from prover_assets.lean.extract import reinsertion_keeps_statement, remove_comments
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.signature import float_numerals
from prover_assets.lean.statements import (
    BY_MARKER,
    ParsedStatement,
    StatementError,
    normalise_statement,
    parse_statement,
)
from prover_assets.problems.decontamination import (
    DecontaminationSets,
    informal_tokens,
    name_matches,
    ngram_hashes,
)
from prover_assets.problems.shards import (
    PoolInputError,
    ScanTask,
    check_row,
    open_shard,
    plan_scan,
    shard_batches,
    shard_column,
)
from prover_assets.records import Problem, reason_kind, sha256_file
from prover_assets.records.outputs import StageResult
from prover_assets.records.validity import CountsError

__all__ = [
    "PoolBuild",
    "PoolCandidatesResult",
    "PoolCounts",
    "PoolInputError",
    "build_pool_candidates",
    "check_shards",
    "rank_key",
]

log = logging.getLogger(__name__)

_BARE_TAIL = re.compile(r"\s*sorry\s*")
Progress = Callable[[int, int], None]


# The `PoolCounts` fields that count rows dropped (besides `unsupported_shape`, by shape).
# Each layer that drops rows, in the words the pool's funnel plot shows it in.
_DROP_WORDS = {
    "not_bare_statement": "not a bare theorem statement",
    "too_long": "statement too long",
    "sorry_not_once": "not exactly one sorry",
    "float_numerals": "decimals that elaborate as Float",
    "decontam_statement_sha": "an eval statement, exactly",
    "decontam_alpha_sha": "an eval statement, renamed",
    "decontam_name": "an eval theorem's name",
    "beyond_k": "ranked past the K kept",
    "decontam_informal_long": "an eval problem's text (long n-gram)",
    "decontam_informal_short": "an eval problem's text (short n-grams)",
    "decontam_mobench_informal": "a MOBench problem's text",
    "duplicate_statement": "a duplicate statement",
}
_DROP_REASONS = tuple(_DROP_WORDS)


@dataclass
class PoolCounts:
    """Where the pool's rows went: candidates, and every row dropped, by the layer that dropped
    it."""

    rows_in: int = 0
    not_bare_statement: int = 0
    unsupported_shape: Counter[str] = field(default_factory=Counter)
    too_long: int = 0
    sorry_not_once: int = 0
    float_numerals: int = 0  # a decimal literal that would elaborate as Float (dropped)
    decontam_statement_sha: int = 0
    decontam_alpha_sha: int = 0
    decontam_name: int = 0
    beyond_k: int = 0
    decontam_informal_long: int = 0
    decontam_informal_short: int = 0
    decontam_mobench_informal: int = 0
    duplicate_statement: int = 0
    without_informal: int = 0  # ranked candidates that carry no informal text (not a drop)
    float_numerals_kept: int = 0  # flagged as Float but kept (`float_numerals: keep`)
    written: int = 0

    def merge(self, other: PoolCounts) -> None:
        for name, value in vars(other).items():
            if isinstance(value, Counter):
                getattr(self, name).update(value)
            else:
                setattr(self, name, getattr(self, name) + value)

    def drops(self) -> dict[str, int]:
        """Every row dropped, by reason (each unsupported shape by its own), most first."""
        counts = Counter({name: getattr(self, name) for name in _DROP_REASONS})
        counts.update({f"unsupported_shape:{r}": n for r, n in self.unsupported_shape.items()})
        return {reason: n for reason, n in counts.most_common() if n}

    def dropped(self) -> int:
        return sum(self.drops().values())

    def reconciles(self) -> bool:
        return self.rows_in == self.written + self.dropped()

    def to_result(self) -> PoolCandidatesResult:
        """The counts as the step's result, with the drop totals."""
        data: dict[str, Any] = dict(vars(self))
        data["unsupported_shape"] = dict(sorted(self.unsupported_shape.items()))
        data["unsupported_shape_total"] = sum(self.unsupported_shape.values())
        data["dropped"] = self.dropped()
        return PoolCandidatesResult.model_validate(data)


class PoolCandidatesResult(StageResult):
    """`PoolCounts` as recorded: where the pool's rows went (`rows_in = written + dropped`)."""

    rows_in: int
    not_bare_statement: int
    unsupported_shape: dict[str, int]
    unsupported_shape_total: int
    too_long: int
    sorry_not_once: int
    float_numerals: int
    decontam_statement_sha: int
    decontam_alpha_sha: int
    decontam_name: int
    beyond_k: int
    decontam_informal_long: int
    decontam_informal_short: int
    decontam_mobench_informal: int
    duplicate_statement: int
    without_informal: int
    float_numerals_kept: int
    written: int
    dropped: int

    def drops(self) -> dict[str, int]:
        """Rows dropped, by layer (each unsupported shape on its own)."""
        not_drops = {
            "rows_in",
            "written",
            "dropped",
            "without_informal",
            "float_numerals_kept",
            "unsupported_shape_total",
        }
        flat = {name: value for name, value in self if isinstance(value, int)}
        return {name: value for name, value in flat.items() if name not in not_drops} | {
            f"unsupported_shape:{k}": v for k, v in self.unsupported_shape.items()
        }

    def funnel(self) -> list[tuple[str, int]]:
        """From the rows read to the candidates kept: the rows left after each layer that
        dropped any (layers as `drops` lists them)."""
        stages = [("rows read", self.rows_in)]
        left = self.rows_in
        for layer, dropped in self.drops().items():
            if dropped:
                left -= dropped
                stages.append((f"less {_drop_words(layer)} (-{dropped:,})", left))
        stages.append(("candidates kept", self.written))
        return stages


def _drop_words(layer: str) -> str:
    """A drop reason as the funnel says it (an unsupported shape by its own name)."""
    if layer.startswith("unsupported_shape:"):
        return f"unsupported shape {layer.partition(':')[2]}"
    return _DROP_WORDS[layer]


def _float_dropped(statement: str, spec: PoolSpec, counts: PoolCounts) -> bool:
    """Whether the row goes for a decimal that would elaborate as Float (`float_numerals: drop`);
    a flagged row that stays is counted as kept."""
    if not float_numerals(statement):
        return False
    if spec.float_numerals == "drop":
        counts.float_numerals += 1
        return True
    counts.float_numerals_kept += 1
    return False


@dataclass(frozen=True, order=True)
class _Ranked:
    key: bytes
    problem_id: str
    formal_statement: str
    informal: str | None
    source: str
    statement_sha: str
    alpha_sha: str
    header: str


@dataclass
class PoolBuild:
    """The ranked candidates and their counts."""

    candidates: list[Problem]  # in rank order
    counts: PoolCounts


def rank_key(seed: int, problem_id: str) -> bytes:
    """A row's rank: `sha256(seed|problem_id)`, the same on every machine and every run."""
    return hashlib.sha256(f"{seed}|{problem_id}".encode()).digest()


def check_shards(shards: Sequence[tuple[Path, str]]) -> dict[str, str]:
    """Every shard must exist and match its expected sha256, before any row is read."""
    actual = {}
    for path, expected in shards:
        if not path.is_file():
            raise PoolInputError(f"pool shard {path} does not exist")
        digest = sha256_file(path)
        if digest != expected:
            raise PoolInputError(
                f"pool shard {path} has sha256 {digest}, expected {expected} (the pinned "
                "revision's LFS oid): wrong file or wrong revision; nothing was read"
            )
        actual[str(path)] = digest
    return actual


def _shaped(text: str, counts: PoolCounts) -> tuple[str, ParsedStatement] | None:
    """The bare statement and its parse, or None (the reason counted): one `:= by sorry`, a
    supported shape, and a preamble that re-insertion hands Lean unchanged."""
    markers = list(BY_MARKER.finditer(text))
    if len(markers) != 1 or not _BARE_TAIL.fullmatch(text, markers[0].end()):
        counts.not_bare_statement += 1
        return None
    try:
        statement = normalise_statement(text)
    except StatementError:
        counts.not_bare_statement += 1
        return None
    parsed = parse_statement(statement)
    if not parsed.supported or parsed.signature is None:
        counts.unsupported_shape[reason_kind(parsed.reason or "unsupported")] += 1
        return None
    if parsed.preamble_tokens and not reinsertion_keeps_statement(statement):
        counts.unsupported_shape["reinsertion_changes_statement"] += 1
        return None
    return statement, parsed


def _screen(
    problem_id: str,
    text: str,
    source: str,
    informal: str | None,
    spec: PoolSpec,
    sets: DecontaminationSets,
    embedded: re.Pattern[str] | None,
    counts: PoolCounts,
) -> _Ranked | None:
    """Layers up to 3; None (and the reason counted) when the row is dropped."""
    shaped = _shaped(text, counts)
    if shaped is None:
        return None
    statement, parsed = shaped
    if len(text) > spec.max_statement_chars:
        counts.too_long += 1
        return None
    if remove_comments(statement).count("sorry") != 1:
        counts.sorry_not_once += 1
        return None
    if _float_dropped(statement, spec, counts):
        return None
    statement_sha = parsed.statement_sha
    if statement_sha in sets.statement_shas:
        counts.decontam_statement_sha += 1
        return None
    alpha_sha = parsed.alpha_sha
    if alpha_sha in sets.alpha_shas:
        counts.decontam_alpha_sha += 1
        return None
    if name_matches((parsed.signature.name, problem_id), sets.names, embedded):
        counts.decontam_name += 1
        return None
    header = parsed.header
    if not header:
        # A bare theorem gets the protocol's header, so every Problem is a full file.
        statement = GOEDEL_HEADER + statement.lstrip()
        header = GOEDEL_HEADER.strip()
    return _Ranked(
        key=rank_key(spec.seed, problem_id),
        problem_id=problem_id,
        formal_statement=statement,
        informal=informal,
        source=source,
        statement_sha=statement_sha,
        alpha_sha=alpha_sha,
        header=header,
    )


_WORKER_SETS: DecontaminationSets | None = None


def _init_worker(sets: DecontaminationSets) -> None:
    global _WORKER_SETS
    _WORKER_SETS = sets


def _scan(task: ScanTask, sets: DecontaminationSets | None = None) -> tuple[PoolCounts, list]:
    sets = sets or _WORKER_SETS
    assert sets is not None
    spec = task.spec
    columns = spec.columns
    wanted = [
        c
        for c in (columns.problem_id, columns.formal_statement, columns.informal, columns.source)
        if c is not None
    ]
    embedded = sets.embedded_pattern()
    counts = PoolCounts()
    heap: list[tuple[bytes, _Ranked]] = []  # max-heap by key via inverted bytes
    parquet = open_shard(task.path)
    missing = [c for c in wanted if c not in parquet.schema_arrow.names]
    if missing:
        raise PoolInputError(
            f"{task.path}: missing columns {missing}; columns are {parquet.schema_arrow.names}"
        )
    # A task's row groups are consecutive: its rows are numbered on from the first one's.
    row = sum(parquet.metadata.row_group(g).num_rows for g in range(task.row_groups[0]))
    for batch in shard_batches(parquet, task, wanted):
        ids = shard_column(batch, columns.problem_id, task.path)
        texts = shard_column(batch, columns.formal_statement, task.path)
        informals = shard_column(batch, columns.informal, task.path) or [None] * len(ids)
        sources = shard_column(batch, columns.source, task.path) or [task.dataset] * len(ids)
        for problem_id, text, informal, source in zip(ids, texts, informals, sources, strict=True):
            counts.rows_in += 1
            check_row(f"{task.path}: row {row}", problem_id, text, columns)
            row += 1
            ranked = _screen(
                problem_id, text, source or task.dataset, informal, spec, sets, embedded, counts
            )
            if ranked is None:
                continue
            inverted = bytes(255 - b for b in ranked.key)
            if len(heap) < spec.candidates:
                heapq.heappush(heap, (inverted, ranked))
            elif inverted > heap[0][0]:
                heapq.heapreplace(heap, (inverted, ranked))
                counts.beyond_k += 1
            else:
                counts.beyond_k += 1
    return counts, [ranked for _, ranked in heap]


def _informal_drop(informal: str | None, sets: DecontaminationSets, spec: PoolSpec) -> str | None:
    if not informal:
        return None
    tokens = informal_tokens(informal)
    long_grams = ngram_hashes(tokens, sets.long_ngram)
    short_grams = ngram_hashes(tokens, sets.short_ngram)
    if long_grams & sets.scored_long:
        return "decontam_informal_long"
    if len(short_grams & sets.scored_short) >= spec.min_short_ngram_overlaps:
        return "decontam_informal_short"
    if long_grams & sets.mobench_long or (
        len(short_grams & sets.mobench_short) >= spec.min_short_ngram_overlaps
    ):
        return "decontam_mobench_informal"
    return None


def _top_k(ranked: list[_Ranked], spec: PoolSpec, counts: PoolCounts) -> list[_Ranked]:
    """The `spec.candidates` smallest ranks (the rest counted `beyond_k`); ids must be unique."""
    ranked = sorted(ranked)
    counts.beyond_k += max(0, len(ranked) - spec.candidates)
    ranked = ranked[: spec.candidates]
    ids = [item.problem_id for item in ranked]
    if len(set(ids)) != len(ids):
        duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
        raise PoolInputError(f"duplicate problem_id in the pool: {duplicates[:5]}")
    return ranked


def _screened(
    ranked: list[_Ranked], sets: DecontaminationSets, spec: PoolSpec, counts: PoolCounts
) -> list[Problem]:
    """The candidates in rank order, less informal-text overlaps with the evaluation sets and
    repeated statements (each drop counted by its reason)."""
    candidates = []
    seen_statements: set[str] = set()
    for item in ranked:
        reason = _informal_drop(item.informal, sets, spec)
        if reason is None and item.statement_sha in seen_statements:
            reason = "duplicate_statement"
        if reason is not None:
            setattr(counts, reason, getattr(counts, reason) + 1)
            continue
        if not item.informal:
            counts.without_informal += 1
        seen_statements.add(item.statement_sha)
        candidates.append(
            Problem(
                problem_id=item.problem_id,
                source=item.source,
                split="train",
                formal_statement=item.formal_statement,
                informal_prefix=item.informal or "",
                statement_sha=item.statement_sha,
                alpha_sha=item.alpha_sha,
                header=item.header,
            )
        )
    return candidates


def build_pool_candidates(
    shards: Sequence[Path],
    spec: PoolSpec,
    sets: DecontaminationSets,
    *,
    progress: Progress | None = None,
) -> PoolBuild:
    """Stream the shards (already sha-checked by `check_shards`) into ranked candidates."""
    tasks, total_rows = plan_scan(shards, spec, spec.dataset)
    counts = PoolCounts()
    ranked: list[_Ranked] = []
    started = time.monotonic()

    def collect(result: tuple[PoolCounts, list[_Ranked]]) -> None:
        task_counts, task_ranked = result
        counts.merge(task_counts)
        ranked.extend(task_ranked)
        if progress is not None:
            progress(counts.rows_in, total_rows)
        log.info(
            "pool: %d / %d rows screened (%.0f rows/s)",
            counts.rows_in,
            total_rows,
            counts.rows_in / max(time.monotonic() - started, 1e-9),
        )

    if spec.workers == 1 or len(tasks) == 1:
        for task in tasks:
            collect(_scan(task, sets))
    else:
        # spawn, not fork: the caller may hold threads (Dagster, a web server).
        with ProcessPoolExecutor(
            max_workers=spec.workers,
            mp_context=get_context("spawn"),
            initializer=_init_worker,
            initargs=(sets,),
        ) as executor:
            for future in as_completed([executor.submit(_scan, task) for task in tasks]):
                collect(future.result())

    candidates = _screened(_top_k(ranked, spec, counts), sets, spec, counts)
    counts.written = len(candidates)
    if not counts.reconciles():
        raise CountsError(f"pool counts do not reconcile: {counts.to_result()}")
    return PoolBuild(candidates=candidates, counts=counts)
