"""The generation steps as whole operations: which samples, from which model, into which file.

A generations folder holds `generations.jsonl` (the resumable stream), `stream.json` (what
the stream is made of: model revision, sampling, inputs; a resume must match it) and, once
every sample is there, `manifest.json`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prover_assets.config import ExperimentSpec, require_filled, resolve_path
from prover_assets.cpu_threads import torch_threads
from prover_assets.demo.shared_tunings import (
    copy_tuning,
    holding_entry,
    publish_tuning,
    tuning_key,
)
from prover_assets.demo.tiny_model import FormatTuningResult, tuning_recipe
from prover_assets.generation.corrections import correction_specs, plan_corrections
from prover_assets.generation.engines import EngineOpening, GenerationEngine
from prover_assets.generation.revision import model_revision
from prover_assets.generation.runner import (
    CorrectionCounts,
    GenerationBatchResult,
    GenerationStats,
    SamplePlan,
    SampleSpec,
    generate_samples,
    round0_specs,
)
from prover_assets.records import (
    Appender,
    Generation,
    Problem,
    Verification,
    iter_records,
    read_records,
)
from prover_assets.records.outputs import (
    Step,
    StepInputs,
    StepResult,
    require_rows,
)
from prover_assets.records.progress import TrainingProgressCallback
from prover_assets.records.staleness import current_verdicts
from prover_assets.records.store import RecordError

__all__ = [
    "GENERATIONS_FILE",
    "Samples",
    "correction_samples",
    "hub_model",
    "materialize_generations",
    "recorded_solved_before",
    "round0_problems",
    "round0_samples",
    "solved_problems",
]

log = logging.getLogger(__name__)

GENERATIONS_FILE = "generations.jsonl"
EngineFactory = Callable[[EngineOpening], contextlib.AbstractContextManager[GenerationEngine]]


class Samples:
    """The specs of a generation step, the files they came from, and how they were chosen."""

    def __init__(
        self,
        specs: Sequence[SampleSpec],
        inputs: dict[str, Path],
        *,
        samples_per_problem: int,
        corrections: CorrectionCounts | None = None,
        allow_empty: bool = False,
    ) -> None:
        self.specs = list(specs)
        self.inputs = inputs
        self.plan = SamplePlan(
            problems=len({spec.problem.problem_id for spec in self.specs}),
            samples_per_problem=samples_per_problem,
            samples=len(self.specs),
            corrections=corrections,
        )
        self.allow_empty = allow_empty


def hub_model(spec: ExperimentSpec) -> tuple[Path, str]:
    """The base model of a registered experiment: the hub snapshot at `model.path` and the
    revision the config declares for it (checked against the folder)."""
    path = resolve_path(require_filled(spec.model.path or "", "spec.model.path"), "spec.model.path")
    if not path.is_dir():
        raise FileNotFoundError(
            f"spec.model.path {path} is not a folder: download the snapshot there"
        )
    return path, model_revision(path, spec.model.revision)


def solved_problems(rounds: Sequence[tuple[Path, Path]]) -> set[str]:
    """The problems with an accepted current verdict in any of `rounds` (generations file,
    verdicts file)."""
    solved: set[str] = set()
    for generations_file, verdicts_file in rounds:
        generations = {g.key: g for g in iter_records(generations_file, Generation)}
        judged = current_verdicts(generations, iter_records(verdicts_file, Verification))
        solved |= {key.problem_id for key, verdict in judged.items() if verdict.accepted}
    return solved


def round0_problems(
    problems_file: Path, solved_before: Sequence[tuple[Path, Path]] = ()
) -> list[Problem]:
    """The problems of `problems_file` that round 0 samples: those no round of
    `solved_before` (an earlier iteration's pool rounds) solved."""
    solved = solved_problems(solved_before)
    return [p for p in read_records(problems_file, Problem) if p.problem_id not in solved]


def round0_samples(
    problems_file: Path,
    samples_per_problem: int,
    cap: int,
    *,
    allow_empty: bool = False,
    solved_before: Sequence[tuple[Path, Path]] = (),
    references: Path | None = None,
) -> Samples:
    """The round-0 batch of the problems in `problems_file` (less those solved in
    `solved_before`): `samples_per_problem` samples each at cap `cap`. `references`: an eval
    set's reference elaboration, whose gate (every statement elaborates) the batch rests on,
    recorded as an input so that every reader after it inherits that gate."""
    problems = round0_problems(problems_file, solved_before)
    earlier = {
        _solved_before_name(i, kind): path
        for i, files in enumerate(solved_before)
        for kind, path in zip(("generations", "verdicts"), files, strict=True)
    }
    return Samples(
        round0_specs(problems, samples_per_problem, cap),
        {
            "problems": problems_file,
            **({} if references is None else {"reference_elaboration": references}),
            **earlier,
        },
        samples_per_problem=samples_per_problem,
        allow_empty=allow_empty,
    )


def _solved_before_name(index: int, kind: str) -> str:
    return f"solved_before_{index}_{kind}"


def recorded_solved_before(made_from: Mapping[str, Path]) -> list[tuple[Path, Path]]:
    """The (generations, verdicts) of the pool rounds whose solved problems a round-0 step left
    out, from the inputs it was made from by name (`records.outputs.verified_inputs`), in the
    order it was given them."""
    pairs: list[tuple[Path, Path]] = []
    while (generations := _solved_before_name(len(pairs), "generations")) in made_from:
        pairs.append(
            (made_from[generations], made_from[_solved_before_name(len(pairs), "verdicts")])
        )
    return pairs


def correction_samples(
    problems_file: Path,
    previous_generations: Path,
    previous_verdicts: Path,
    *,
    round: int,
    samples_per_problem: int,
    samples_per_parent: int,
    allow_empty: bool = False,
) -> Samples:
    """Children of the failed samples (with Lean errors) of problems unsolved in round - 1."""
    problems = {p.problem_id: p for p in read_records(problems_file, Problem)}
    previous = {g.key: g for g in iter_records(previous_generations, Generation)}
    verdicts = current_verdicts(previous, iter_records(previous_verdicts, Verification))
    plan = plan_corrections(
        previous, verdicts, round=round, samples_per_problem=samples_per_problem
    )
    specs = correction_specs(plan, problems, samples_per_parent=samples_per_parent)
    inputs = {
        "problems": problems_file,
        "previous_generations": previous_generations,
        "previous_verdicts": previous_verdicts,
    }
    return Samples(
        specs,
        inputs,
        samples_per_problem=samples_per_problem,
        corrections=plan.counts(),
        allow_empty=allow_empty,
    )


def materialize_generations(
    folder: Path,
    samples: Samples,
    *,
    opening: EngineOpening,
    open_engine: EngineFactory,
    load_tokenizer: Callable[[Path], Any],
    progress: Callable[[GenerationStats], None] | None = None,
    run_id: str | None = None,
) -> StepResult[GenerationBatchResult]:
    """Generate every missing sample with the engine `open_engine` opens as `opening` asks;
    reuse a complete, current output; refuse a foreign one. `run_id`: the orchestrator's run
    that completes the output, recorded in its manifest."""
    require_rows(
        len(samples.specs), f"the generation batch {folder}", allow_empty=samples.allow_empty
    )
    inputs = StepInputs.hash(samples.inputs)
    identity = {
        "model_rev": opening.model_rev,
        "sampling": asdict(opening.sampling),
        "base_seed": opening.seed,
        "max_model_len": opening.max_model_len,
        "samples": len(samples.specs),
        "inputs": inputs.digests,
    }
    step = Step(folder, str(folder), GenerationBatchResult, inputs, identity)
    if (reused := step.reused()) is not None:
        return reused
    step.begin_stream()
    path = folder / GENERATIONS_FILE
    with step.journaled(), Appender(path, Generation) as appender:
        _refuse_keys_outside(appender, samples)
        stats, engine_description = _generate_missing(
            appender, samples, opening, open_engine, load_tokenizer, progress
        )
    rows = _require_every_planned_sample(path, samples)
    return step.finish(
        stats.to_result(rows=rows, plan=samples.plan),
        [path],
        extra={
            "engine": engine_description,
            "model_path": str(opening.model_path),
            "run_id": run_id,
        },
    )


def _generate_missing(
    appender: Appender[Generation],
    samples: Samples,
    opening: EngineOpening,
    open_engine: EngineFactory,
    load_tokenizer: Callable[[Path], Any],
    progress: Callable[[GenerationStats], None] | None,
) -> tuple[GenerationStats, dict[str, Any]]:
    """Open the engine only when a sample is missing."""
    if all(s.key in appender for s in samples.specs):
        stats = GenerationStats(total=len(samples.specs), already_present=len(samples.specs))
        return stats, {"engine": "none needed: every sample was present"}
    with open_engine(opening) as engine:
        tokenizer = getattr(engine, "tokenizer", None) or load_tokenizer(opening.model_path)
        stats = generate_samples(
            samples.specs, engine, tokenizer, appender, opening=opening, progress=progress
        )
        return stats, engine.describe()


def _require_every_planned_sample(path: Path, samples: Samples) -> int:
    """Read back what the stream holds: exactly the plan's samples; returns how many."""
    expected = {s.key for s in samples.specs}
    present = {g.key for g in iter_records(path, Generation)}
    if present != expected:
        raise RuntimeError(
            f"{path}: {len(expected - present)} samples missing, {len(present - expected)} unexpected"
        )
    return len(present)


def _refuse_keys_outside(appender: Appender[Generation], samples: Samples) -> None:
    """A stream holding a sample this plan does not ask for was written for another plan (or
    edited): appending to it would mix the two, so nothing is appended."""
    planned = {s.key for s in samples.specs}
    foreign = [(line, key) for key, line in appender.keys.items() if key not in planned]
    if foreign:
        line, key = min(foreign)
        raise RecordError(
            appender.path,
            line,
            f"sample {key} is not in this step's plan ({len(foreign)} such rows): the file was "
            "written for another plan or edited; rematerialize with recompute: true",
        )


def materialize_demo_model(
    folder: Path,
    statement_files: Sequence[Path],
    *,
    hidden_size: int,
    layers: int,
    vocab_size: int,
    steps: int,
    seed: int,
    shared: Path | None = None,
    progress: TrainingProgressCallback | None = None,
    cpu_threads: int | None = None,
) -> StepResult[FormatTuningResult]:
    """The demo's base model: the tiny model, fine-tuned for a few CPU seconds to answer the
    demo's statements in the prover's output format (a plan, then a fenced `lean4` block).
    With `shared`, a tuning of the same statements, settings and recipe (`tuning_recipe`: the
    untuned model, the examples, the tuning's code) made for another data root is copied
    (`shared_tunings`), and this one is shared when it is the first. A tuning made here runs on
    `cpu_threads` of torch's threads (None: as they are)."""
    from prover_assets.generation.revision import MODEL_DIR

    inputs = StepInputs.hash({path.parent.name: path for path in statement_files})
    config = {
        "hidden_size": hidden_size,
        "layers": layers,
        "vocab_size": vocab_size,
        "steps": steps,
        "seed": seed,
    }
    step = Step(folder, str(folder), FormatTuningResult, inputs, config)
    if (reused := step.reused()) is not None:
        return reused
    model_dir = folder / MODEL_DIR
    statements = [
        p.formal_statement for path in statement_files for p in read_records(path, Problem)
    ]
    _build_demo_model(model_dir, config)
    threads = {"cpu_threads": cpu_threads}
    if shared is None:
        with torch_threads(cpu_threads):
            result = _tune_demo_model(model_dir, statements, config, progress)
        return step.finish(result, sorted(p for p in model_dir.iterdir() if p.is_file()), threads)
    settings = {**config, "recipe": tuning_recipe(model_dir, statements)}
    key = tuning_key(inputs.digests, settings)
    with holding_entry(shared, key) as entry:
        result = copy_tuning(entry, model_dir)
        copied = result is not None
        if result is None:
            with torch_threads(cpu_threads):
                result = _tune_demo_model(model_dir, statements, config, progress)
            publish_tuning(
                entry, model_dir, inputs=inputs.digests, settings=settings, result=result
            )
    files = sorted(p for p in model_dir.iterdir() if p.is_file())
    shared_tuning = {"entry": str(entry), "copied": copied}
    return step.finish(
        result, files, {"shared_tuning": shared_tuning, **({} if copied else threads)}
    )


def _build_demo_model(model_dir: Path, config: dict[str, int]) -> None:
    """The untuned tiny model: its tokenizer trained, its weights drawn from the seed."""
    from prover_assets.demo.tiny_model import build_tiny_model

    build_tiny_model(
        model_dir,
        hidden_size=config["hidden_size"],
        layers=config["layers"],
        vocab_size=config["vocab_size"],
        seed=config["seed"],
    )


def _tune_demo_model(
    model_dir: Path,
    statements: list[str],
    config: dict[str, int],
    progress: TrainingProgressCallback | None,
) -> FormatTuningResult:
    from prover_assets.demo.tiny_model import teach_output_format

    return teach_output_format(
        model_dir, statements, steps=config["steps"], seed=config["seed"], progress=progress
    )
