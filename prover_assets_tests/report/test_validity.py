"""The report judges every validity condition itself, from the files it reads: each condition
broken by hand in otherwise sound runs fails by name, and its comparison is INVALID."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from prover_assets.config import SftSpec
from prover_assets.generation.prompts import round0_messages
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.problems.stages import EvalSetResult
from prover_assets.records import Stage, build_manifest, publish_records, write_manifest
from prover_assets.report.analysis import DECISIONS, INVALID
from prover_assets.report.runs import RunFiles
from prover_assets.report.stages import ReportSettings, build_report
from prover_assets.report.validity import (
    JudgedFile,
    TrainingFiles,
    ValiditySettings,
    judge_comparison,
)
from prover_assets.sft.export import ExportResult
from prover_assets.sft.shards import ROWS_FILE
from prover_assets.sft.stages import eos_token_ids, materialize_shards
from prover_assets.sft.trainer import DATA_ORDER_FILE
from prover_assets.verify.runner import CHUNKS_FILE, CommitChunk
from prover_assets_tests.factories import (
    GOEDEL_HEADER,
    finish_step_folder,
    make_generation,
    make_pins,
    make_problem,
    make_sampling,
    make_training_result,
    make_verification,
)
from prover_assets_tests.support import CONFIGS

PROBLEMS = ["p0", "p1", "p2", "p3"]
SAMPLES = 4
SETTINGS = ValiditySettings(samples_per_problem=SAMPLES, max_infrastructure_share=0.01)


def statement(problem_id: str) -> str:
    n = PROBLEMS.index(problem_id)
    return GOEDEL_HEADER + f"theorem {problem_id} (x : ℕ) : 0 < x + {n + 1} := by sorry"


def write_eval_set(root: Path) -> Path:
    """An eval set as its step leaves it: Goedel-format source rows, the problems, the counts."""
    source = root / "sources" / "minif2f.jsonl"
    source.parent.mkdir(parents=True)
    source.write_text(
        "".join(json.dumps({"problem_id": p, "lean4_code": statement(p)}) + "\n" for p in PROBLEMS)
    )
    folder = root / "eval_sets" / "minif2f"
    folder.mkdir(parents=True)
    publish_records(folder / "problems.jsonl", [make_problem(p, statement(p)) for p in PROBLEMS])
    n = len(PROBLEMS)
    counts = EvalSetResult(
        rows_in=n, supported=n, unsupported=0, limited_out=0, written=n, unsupported_reasons={}
    )
    manifest = build_manifest(
        folder=folder,
        asset="eval_sets/minif2f",
        inputs=[source],
        outputs=[folder / "problems.jsonl"],
        config={},
        counts=counts.model_dump(mode="json"),
        started_at="t",
    )
    write_manifest(folder, manifest)
    return folder / "problems.jsonl"


def write_run(root: Path, system: str, problems: Path, **sampling) -> RunFiles:
    """`system`'s sound run: SAMPLES samples per problem, the first accepted for the baseline's
    first two problems and the candidate's first three."""
    solved = 2 if system == "baseline" else 3
    generations, verdicts = [], []
    for p in PROBLEMS:
        messages = round0_messages(statement(p))
        for idx in range(SAMPLES):
            generation = make_generation(
                p, idx, messages=messages, sampling=make_sampling(seed=idx, **sampling)
            )
            generations.append(generation)
            accepted = idx == 0 and PROBLEMS.index(p) < solved
            verdicts.append(make_verification(generation, accepted=accepted))
    gen_dir, ver_dir = root / "generations" / system, root / "verdicts" / system
    for folder, name, records in (
        (gen_dir, "generations.jsonl", generations),
        (ver_dir, "verdicts.jsonl", verdicts),
    ):
        folder.mkdir(parents=True)
        publish_records(folder / name, records)
        finish_step_folder(folder, name)
    return RunFiles(
        system, "minif2f", 64, problems, gen_dir / "generations.jsonl", ver_dir / "verdicts.jsonl"
    )


def edit_lines(path: Path, edit: Callable[[list[dict]], list[dict]]) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(row) + "\n" for row in edit(rows)))


def sound_pair(root: Path) -> tuple[RunFiles, RunFiles]:
    problems = write_eval_set(root)
    return write_run(root, "baseline", problems), write_run(root, "candidate", problems)


# Each condition, and a fault that breaks it alone, as a real fault would leave the files.
def wrong_counts(base: RunFiles, cand: RunFiles) -> None:
    folder = base.problems.parent
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["counts"]["rows_in"] += 1  # a row read that was neither written nor dropped
    write_manifest(folder, manifest)


def duplicate_id(base: RunFiles, cand: RunFiles) -> None:
    edit_lines(base.problems, lambda rows: rows + rows[:1])


def unparsable_statement(base: RunFiles, cand: RunFiles) -> None:
    def edit(rows):
        # A record the contract takes whose statement does not split: an `example` preamble.
        text = (
            GOEDEL_HEADER + "example : True := trivial\n\n" + statement("p3")[len(GOEDEL_HEADER) :]
        )
        rows[3] = json.loads(make_problem("p3", text).model_dump_json())
        return rows

    edit_lines(base.problems, edit)


def not_goedels_statement(base: RunFiles, cand: RunFiles) -> None:
    source = base.problems.parent.parent.parent / "sources" / "minif2f.jsonl"

    def edit(rows):
        rows[1]["lean4_code"] = rows[1]["lean4_code"].replace("x + 2", "x + 20")
        return rows

    edit_lines(source, edit)


def missing_sample(base: RunFiles, cand: RunFiles) -> None:
    for path in (cand.generations, cand.verdicts):
        edit_lines(path, lambda rows: rows[:-1])


def missing_verdict(base: RunFiles, cand: RunFiles) -> None:
    edit_lines(cand.verdicts, lambda rows: rows[:-1])


def accepted_at_the_cap(base: RunFiles, cand: RunFiles) -> None:
    def edit(rows):
        rows[0].update(finish_reason="length", completion_ids=[5] * 64)  # p0 sample 0: accepted
        return rows

    edit_lines(cand.generations, edit)


def half_dead_chunk(base: RunFiles, cand: RunFiles) -> None:
    chunk = CommitChunk(index=0, samples=4, infrastructure=3)
    publish_records(cand.verdicts.parent / CHUNKS_FILE, [chunk])


def infrastructure_verdict(base: RunFiles, cand: RunFiles) -> None:
    def edit(rows):
        rows[-1].update(
            accepted=False, stage=Stage.INFRASTRUCTURE.value, reasons=["infrastructure:crash"]
        )
        return rows

    edit_lines(cand.verdicts, edit)  # 1 of 16 = 6.25 %, over 1 %


def other_verifier(base: RunFiles, cand: RunFiles) -> None:
    pins = make_pins(mathlib_rev="0" * 8).model_dump(mode="json")

    def edit(rows):
        for row in rows:
            row["verifier"]["pins"] = pins
        return rows

    edit_lines(cand.verdicts, edit)


def other_sampling(base: RunFiles, cand: RunFiles) -> None:
    def edit(rows):
        for row in rows:
            row["sampling"]["temperature"] = 0.7
        return rows

    edit_lines(cand.generations, edit)


FAULTS = {
    "counts_reconcile": wrong_counts,
    "ids_unique": duplicate_id,
    "statements_parse": unparsable_statement,
    "goedel_normalisation": not_goedels_statement,
    "samples_per_problem": missing_sample,
    "verdicts_cover_generations": missing_verdict,
    "no_length_capped_accepted": accepted_at_the_cap,
    "no_chunk_half_dead": half_dead_chunk,
    "infrastructure_within_bound": infrastructure_verdict,
    "verifier_identical": other_verifier,
    "design_match": other_sampling,
}


def test_every_condition_holds_on_sound_runs(tmp_path):
    conditions = judge_comparison(*sound_pair(tmp_path), None, SETTINGS)
    assert sorted({c.name for c in conditions}) == sorted(FAULTS)
    assert [c for c in conditions if not c.held] == []


def test_each_condition_names_the_files_it_judged_with_their_sha256(tmp_path):
    base, cand = sound_pair(tmp_path)
    conditions = {(c.name, c.subject): c for c in judge_comparison(base, cand, None, SETTINGS)}
    judged = conditions[("verdicts_cover_generations", "candidate on minif2f cap 64")].files
    assert [(f.path, f.sha256) for f in judged] == [
        (str(p), hashlib.sha256(p.read_bytes()).hexdigest())
        for p in (cand.generations, cand.verdicts)
    ]
    # the eval set's counts are judged from its step's manifest
    counted = conditions[("counts_reconcile", "eval set minif2f")].files
    assert [f.path for f in counted] == [str(base.problems.parent / "manifest.json")]


# What else a fault breaks, by hand: a duplicate id makes the problems unreadable to every
# reader of records; a statement Goedel's rule would not give is not the source's; a missing
# sample is also a difference from the baseline, sample by sample.
ALSO_FAILED = {
    "ids_unique": {"statements_parse", "goedel_normalisation", "samples_per_problem"},
    "statements_parse": {"goedel_normalisation"},
    "samples_per_problem": {"design_match"},
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_broken_condition_fails_by_name(tmp_path, name):
    base, cand = sound_pair(tmp_path)
    FAULTS[name](base, cand)
    failed = {c.name for c in judge_comparison(base, cand, None, SETTINGS) if not c.held}
    assert failed == {name} | ALSO_FAILED.get(name, set())


# --- the SFT outputs the candidate came from ------------------------------------------------

POOL = ["q0", "q1"]
# 2 rows x 2 epochs, one micro-step each, no accumulation
TRAINING_COUNTS = make_training_result(
    global_step=4, max_steps=4, trained_micro_steps_this_run=4, micro_steps=4, epochs=2
)
EXPORT_COUNTS = ExportResult(
    revision="export-rev",
    dtype="float32",
    merge_max_abs_diff=1e-7,
    merge_max_abs_diff_full_vocabulary=1e-7,
    merge_tolerance=1e-4,
    cast_drift=0.0,
    base_cast_drift=0.0,
    cast_drift_allowance=1e-3,
    parity_inputs=4,
    parity_tokens=96,
)


def no_eval_statements() -> DecontaminationSets:
    empty: frozenset = frozenset()
    return DecontaminationSets(empty, empty, empty, 13, 8, empty, empty, empty, empty)


def write_pool_round(root: Path, eos: int) -> tuple[Path, Path, Path]:
    """The train pool and its round: each problem's first of two samples accepted and ending
    at an EOS, its second rejected; the pool, generations and verdicts files."""
    pool = root / "train_pool" / "pool.jsonl"
    pool.parent.mkdir(parents=True)
    publish_records(pool, [make_problem(p) for p in POOL])
    generations = [
        make_generation(p, idx, completion_ids=[5, 6, eos]) for p in POOL for idx in range(2)
    ]
    verdicts = [
        make_verification(
            g, accepted=g.sample_idx == 0, diagnostics={"displayed_statement_faithful": True}
        )
        for g in generations
    ]
    folder = root / "generations" / "pool"
    folder.mkdir(parents=True)
    publish_records(folder / "generations.jsonl", generations)
    publish_records(folder / "verdicts.jsonl", verdicts)
    return pool, folder / "generations.jsonl", folder / "verdicts.jsonl"


def write_checkpoint(root: Path) -> Path:
    """A finished training run's folder: 2 rows x 2 epochs, each micro-step once in its log."""
    folder = root / "sft_checkpoint"
    folder.mkdir()
    order = [{"micro_step": step, "rows": [step % 2]} for step in range(4)]
    (folder / DATA_ORDER_FILE).write_text("".join(json.dumps(e) + "\n" for e in order))
    training = yaml.safe_load((CONFIGS / "demo.yaml").read_text())["resources"]["experiment"][
        "config"
    ]["spec"]["training"] | {"epochs": 2, "gradient_accumulation": 1}
    manifest = build_manifest(
        folder=folder,
        asset="sft_checkpoint",
        inputs=[],
        outputs=[folder / DATA_ORDER_FILE],
        config={"training": training},
        counts=TRAINING_COUNTS.model_dump(mode="json"),
        started_at="t",
    )
    write_manifest(folder, manifest)
    return folder


def write_training(root: Path, model_dir: Path) -> TrainingFiles:
    """The SFT outputs of a sound round as their steps leave them: the shards built from the
    pool round by the SFT step itself, a checkpoint, an export whose parity held."""
    eos = min(eos_token_ids(model_dir))
    pool, generations, verdicts = write_pool_round(root, eos)
    sets = root / "decontamination_sets.json"
    sets.write_text(json.dumps(no_eval_statements().to_json()))
    shards = root / "sft_shards"
    materialize_shards(
        shards,
        generation_files=[generations],
        verdict_files=[verdicts],
        pool_file=pool,
        sets_file=sets,
        base_model_dir=model_dir,
        spec=SftSpec(
            cap=64, max_per_problem=2, exclude_solved_all=True, fill_duplicates=False,
            max_seq_len=40,
        ),
        samples_per_problem=2,
    )  # fmt: skip
    export = root / "exported_model"
    export.mkdir()
    (export / "model.safetensors").write_bytes(b"")
    finish_step_folder(export, "model.safetensors", counts=EXPORT_COUNTS.model_dump(mode="json"))
    return TrainingFiles(shards, (generations,), pool, sets, write_checkpoint(root), export)


def edit_manifest(folder: Path, edit: Callable[[dict], None]) -> None:
    """A manifest changed and written again whole, as a faulty step would have written it."""
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest["counts"])
    write_manifest(folder, manifest)


def changed_completion(training: TrainingFiles) -> None:
    def edit(rows):
        rows[0]["completion_ids"][0] = 7  # q0 sample 0: a row of the shards
        return rows

    edit_lines(training.pool_generations[0], edit)


def eval_statement_in_the_pool(training: TrainingFiles) -> None:
    leaked = make_problem("q0").statement_sha
    sets = no_eval_statements().to_json() | {"statement_shas": [leaked]}
    training.decontamination_sets.write_text(json.dumps(sets))


def a_row_counted_twice(training: TrainingFiles) -> None:
    edit_manifest(training.shards, lambda counts: counts["counts"].update(written=3))


def no_rows(training: TrainingFiles) -> None:
    (training.shards / ROWS_FILE).write_text("")


def repeated_micro_step(training: TrainingFiles) -> None:
    edit_lines(training.checkpoint / DATA_ORDER_FILE, lambda rows: rows + rows[-1:])


def merge_off_parity(training: TrainingFiles) -> None:
    edit_manifest(training.export, lambda counts: counts.update(merge_max_abs_diff=0.5))


SFT_FAULTS = {
    ("read_back_exact", "SFT shards"): changed_completion,
    ("no_eval_leak", "SFT shards"): eval_statement_in_the_pool,
    ("counts_reconcile", "SFT shards"): a_row_counted_twice,
    ("at_least_one_row", "SFT shards"): no_rows,
    ("data_order", "SFT checkpoint"): repeated_micro_step,
    ("logprob_parity", "exported model"): merge_off_parity,
}
# By hand: shards with no rows also hold fewer rows than their counts say written.
SFT_ALSO_FAILED = {("at_least_one_row", "SFT shards"): {("counts_reconcile", "SFT shards")}}


def sft_conditions(root: Path, training: TrainingFiles) -> list:
    return [
        c for c in judge_comparison(*sound_pair(root), training, SETTINGS) if "SFT" in c.subject
        or c.subject == "exported model"
    ]  # fmt: skip


def test_every_sft_condition_holds_on_a_sound_round(tmp_path, tiny_model_dir):
    conditions = sft_conditions(tmp_path, write_training(tmp_path, tiny_model_dir))
    assert [(c.name, c.subject) for c in conditions] == list(SFT_FAULTS)
    assert [c for c in conditions if not c.held] == []


@pytest.mark.parametrize("fault", list(SFT_FAULTS), ids=lambda f: f"{f[0]}-{f[1]}")
def test_a_broken_sft_condition_fails_by_name(tmp_path, tiny_model_dir, fault):
    training = write_training(tmp_path, tiny_model_dir)
    SFT_FAULTS[fault](training)
    failed = {(c.name, c.subject) for c in sft_conditions(tmp_path, training) if not c.held}
    assert failed == {fault} | SFT_ALSO_FAILED.get(fault, set())


def test_an_sft_condition_whose_file_is_gone_fails_saying_so_and_names_it_missing(
    tmp_path, tiny_model_dir
):
    training = write_training(tmp_path, tiny_model_dir)
    (training.checkpoint / DATA_ORDER_FILE).unlink()
    (order,) = [c for c in sft_conditions(tmp_path, training) if c.name == "data_order"]
    assert order.held is False
    assert order.found.startswith("could not be judged: FileNotFoundError: ")
    assert order.files[0] == JudgedFile(
        path=str(training.checkpoint / DATA_ORDER_FILE), sha256="missing"
    )


def test_each_sft_condition_names_the_files_it_judged(tmp_path, tiny_model_dir):
    training = write_training(tmp_path, tiny_model_dir)
    judged = {
        (c.name, c.subject): [f.path for f in c.files] for c in sft_conditions(tmp_path, training)
    }
    shards_manifest = str(training.shards / "manifest.json")
    assert judged == {
        ("read_back_exact", "SFT shards"): [shards_manifest, str(training.pool_generations[0])],
        ("no_eval_leak", "SFT shards"): [
            shards_manifest, str(training.pool), str(training.decontamination_sets)
        ],
        ("counts_reconcile", "SFT shards"): [shards_manifest],
        ("at_least_one_row", "SFT shards"): [shards_manifest],
        ("data_order", "SFT checkpoint"): [
            str(training.checkpoint / DATA_ORDER_FILE), str(training.checkpoint / "manifest.json")
        ],
        ("logprob_parity", "exported model"): [str(training.export / "manifest.json")],
    }  # fmt: skip


def report_settings() -> ReportSettings:
    return ReportSettings(
        experiment="validity",
        k=2,
        ks=(1, 2),
        alpha=0.05,
        resamples=20,
        seed=1,
        samples_required=SAMPLES,
        power_fractions=(0.1,),
        power_gains_points=(4.0,),
    )


def test_a_sound_comparison_is_decided_by_its_test(tmp_path):
    summary, markdown, _ = build_report([sound_pair(tmp_path)], [], None, report_settings())
    (comparison,) = summary.comparisons
    assert comparison.decision in DECISIONS
    assert summary.validity[0].held is True
    assert "16 of 16 conditions hold (every condition holds)" in markdown


def test_a_failed_condition_makes_the_comparison_invalid_whatever_its_test_says(tmp_path):
    base, cand = sound_pair(tmp_path)
    infrastructure_verdict(base, cand)
    summary, markdown, _ = build_report([(base, cand)], [], None, report_settings())
    (comparison,) = summary.comparisons
    assert comparison.decision == INVALID and not comparison.primary
    assert comparison.secondary_reasons[0].startswith(
        "INVALID: infrastructure_within_bound (candidate on minif2f cap 64): 1 of 16 verdicts"
    )
    assert "15 of 16 conditions hold (**INVALID**)" in markdown
    assert "### minif2f, cap 64: solved@2 — **INVALID**" in markdown
