"""The problem-side steps as whole operations: inputs in, outputs and manifest out.

Each step checks its inputs' sha256 before reading, reuses an output that is complete and
current, refuses a stale one, and publishes atomically (manifest last).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

from prover_assets.config import EvalSetSpec, PoolSpec, resolve_path
from prover_assets.problems.decontamination import DecontaminationSets, build_decontamination_sets
from prover_assets.problems.eval_sets import (
    Unsupported,
    load_minif2f,
    load_mobench,
    reason_histogram,
)
from prover_assets.problems.pool import (
    PoolCandidatesResult,
    Progress,
    build_pool_candidates,
    check_shards,
)
from prover_assets.records import Problem, publish_records, publish_text, read_records, reason_kind
from prover_assets.records.outputs import (
    StageResult,
    Step,
    StepInputs,
    StepResult,
    require_rows,
)

__all__ = [
    "CANDIDATES_FILE",
    "PROBLEMS_FILE",
    "SETS_FILE",
    "UNSUPPORTED_FILE",
    "DecontaminationResult",
    "EvalSetResult",
    "InputChecksumError",
    "materialize_decontamination_sets",
    "materialize_eval_set",
    "materialize_pool_candidates",
    "read_eval_set",
]

log = logging.getLogger(__name__)

PROBLEMS_FILE = "problems.jsonl"
UNSUPPORTED_FILE = "unsupported.json"
SETS_FILE = "decontamination_sets.json"
CANDIDATES_FILE = "train_pool_candidates.jsonl"


class InputChecksumError(ValueError):
    """An input file does not have the sha256 the config names (or the config holds a
    placeholder)."""

    pass


class EvalSetResult(StageResult):
    """Where an evaluation set's rows went; `rows_in = supported + unsupported` and
    `supported = written + limited_out`."""

    rows_in: int
    supported: int
    unsupported: int
    limited_out: int  # beyond a configured limit (the demo's)
    written: int
    unsupported_reasons: dict[str, int]


class DecontaminationResult(StageResult):
    """What the pool is held against: counts of hashes, names and informal texts."""

    scored_problems: int
    statement_shas: int
    alpha_shas: int
    names: int
    mobench_informal_texts: int


def _checked_input(path_text: str, expected_sha: str, where: str) -> StepInputs:
    path = resolve_path(path_text, where)
    if not path.is_file():
        raise InputChecksumError(f"{where}: {path} does not exist")
    inputs = StepInputs.hash({"source": path})
    if (digest := inputs.digests["source"]) != expected_sha:
        raise InputChecksumError(
            f"{where}: {path} has sha256 {digest}, the config records {expected_sha}; "
            "nothing was read or written"
        )
    return inputs


def read_eval_set(spec: EvalSetSpec, source: Path) -> tuple[list[Problem], list[Unsupported]]:
    """An eval set's problems as its format reads them (before `limit`), and what it left out."""
    if spec.format == "minif2f":
        return load_minif2f(source), []
    return load_mobench(source, preambles=bool(spec.preambles))


def materialize_eval_set(name: str, spec: EvalSetSpec, folder: Path) -> StepResult[EvalSetResult]:
    """problems.jsonl (and, for MOBench, unsupported.json with one reason per exclusion)."""
    inputs = _checked_input(spec.file.path, spec.file.sha256, f"eval_sets.{name}.file")
    source = inputs.files["source"]
    config = spec.model_dump(mode="json")
    step = Step(folder, f"eval_problems/{name}", EvalSetResult, inputs, config)
    if (reused := step.reused()) is not None:
        return reused
    problems, unsupported = read_eval_set(spec, source)
    rows_in = len(problems) + len(unsupported)
    if spec.limit is not None:
        problems = problems[: spec.limit]
    require_rows(
        len(problems),
        f"eval set {name} ({source}, {rows_in} rows read)",
        allow_empty=spec.allow_empty,
        dropped=reason_histogram(unsupported),
    )
    outputs = [folder / PROBLEMS_FILE]
    publish_records(folder / PROBLEMS_FILE, problems)
    if spec.format == "mobench":
        publish_text(
            folder / UNSUPPORTED_FILE,
            json.dumps([vars(item) for item in unsupported], indent=1, ensure_ascii=False) + "\n",
        )
        outputs.append(folder / UNSUPPORTED_FILE)
    supported = rows_in - len(unsupported)
    result = EvalSetResult(
        rows_in=rows_in,
        supported=supported,
        unsupported=len(unsupported),
        limited_out=supported - len(problems),
        written=len(problems),
        unsupported_reasons=dict(Counter(reason_kind(u.reason) for u in unsupported)),
    )
    return step.finish(result, outputs)


def materialize_decontamination_sets(
    scored_dirs: dict[str, Path], mobench_dir: Path | None, folder: Path, pool: PoolSpec
) -> StepResult[DecontaminationResult]:
    """The hashes, names and informal n-grams the pool must not contain."""
    files = {name: d / PROBLEMS_FILE for name, d in scored_dirs.items()}
    if mobench_dir is not None:
        files["mobench_unsupported"] = mobench_dir / UNSUPPORTED_FILE
    config = {"long_ngram": pool.informal_long_ngram, "short_ngram": pool.informal_short_ngram}
    step = Step(
        folder, "decontamination_sets", DecontaminationResult, StepInputs.hash(files), config
    )
    if (reused := step.reused()) is not None:
        return reused
    scored: list[Problem] = []
    for directory in scored_dirs.values():
        scored.extend(read_records(directory / PROBLEMS_FILE, Problem))
    mobench_informal: list[str] = []
    if mobench_dir is not None:
        mobench_informal += [
            p.informal_prefix for p in read_records(mobench_dir / PROBLEMS_FILE, Problem)
        ]
        unsupported = json.loads((mobench_dir / UNSUPPORTED_FILE).read_text(encoding="utf-8"))
        mobench_informal += [item["informal_prefix"] for item in unsupported]
    sets = build_decontamination_sets(
        scored,
        mobench_informal,
        long_ngram=pool.informal_long_ngram,
        short_ngram=pool.informal_short_ngram,
    )
    publish_text(folder / SETS_FILE, json.dumps(sets.to_json()) + "\n")
    result = DecontaminationResult(
        scored_problems=len(scored),
        statement_shas=len(sets.statement_shas),
        alpha_shas=len(sets.alpha_shas),
        names=len(sets.names),
        mobench_informal_texts=len(mobench_informal),
    )
    return step.finish(result, [folder / SETS_FILE])


def materialize_pool_candidates(
    spec: PoolSpec, sets_dir: Path, folder: Path, *, progress: Progress | None = None
) -> StepResult[PoolCandidatesResult]:
    """train_pool_candidates.jsonl in rank order; every count in the manifest."""
    shards = [
        (resolve_path(shard.path, f"pool.shards[{i}].path"), shard.sha256)
        for i, shard in enumerate(spec.shards)
    ]
    for i, (_, expected) in enumerate(shards):
        if expected.startswith("REPLACE_ME"):
            raise InputChecksumError(
                f"pool.shards[{i}].sha256 is a placeholder: record the shard's LFS oid at "
                f"revision {spec.revision} (python -m prover_assets.problems.hub)"
            )
    shard_digests = check_shards(shards)
    sets_file = sets_dir / SETS_FILE
    files = {f"shard:{Path(p).name}": Path(p) for p in shard_digests}
    inputs = StepInputs.hash(
        {**files, "decontamination_sets": sets_file},
        known={name: shard_digests[str(path)] for name, path in files.items()},
    )
    config = spec.model_dump(mode="json")
    step = Step(folder, "train_pool_candidates", PoolCandidatesResult, inputs, config)
    if (reused := step.reused()) is not None:
        return reused
    sets = DecontaminationSets.from_json(json.loads(sets_file.read_text(encoding="utf-8")))
    build = build_pool_candidates([p for p, _ in shards], spec, sets, progress=progress)
    require_rows(
        len(build.candidates),
        f"the pool's candidates ({build.counts.rows_in} rows read)",
        allow_empty=spec.allow_empty,
        dropped=build.counts.drops(),
    )
    publish_records(folder / CANDIDATES_FILE, build.candidates)
    return step.finish(
        build.counts.to_result(),
        [folder / CANDIDATES_FILE],
        extra={"dataset": spec.dataset, "revision": spec.revision},
    )
