"""Small builders of valid records, so each test states only what it is about."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from prover_assets.config import RunConfig, TrainingSpec, parse_run_config
from prover_assets.generation.engines import EngineOpening
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.statements import alpha_sha, statement_sha
from prover_assets.records import (
    Generation,
    Message,
    ParentRef,
    Pins,
    Problem,
    Sampling,
    SamplingSettings,
    SftRow,
    Stage,
    Verification,
    VerifierInfo,
    code_sha256,
)
from prover_assets.records.manifest import build_manifest, write_manifest
from prover_assets.report.summary import (
    Cell,
    ComparedSystem,
    Comparison,
    ExploratoryComparison,
    MadeBy,
    McNemarTable,
    PairedProblem,
    ProblemSide,
    RegisteredComparison,
    RunProvenance,
)
from prover_assets.sft.stages import TrainingResult
from prover_assets.stats import Interval
from prover_assets_tests.support import full_demo_run_config

# What a strict verifier records of its policy and backend (StrictVerifier.info.config).
VERIFIER_CONFIG = {
    "budget_s": 180.0,
    "feedback": False,
    "statement_check": "reject",
    "gate": True,
    "axiom_check": True,
    "backend": "local",
    "memory_cap_mb": 12288,
    "infrastructure_retries": 2,
    "sandbox": {"network": "unshare --net", "tmpdir": "private per REPL process"},
}

STATEMENT = GOEDEL_HEADER + "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by sorry"

# A MOBench-shaped problem: a trusted preamble (an answer, a definition, an instance proved by a
# tactic, a namespace left open), then the theorem, which stands in that namespace.
PREAMBLE = (
    "/-- The answer. -/\n"
    "noncomputable abbrev solution : ℝ := 9 * Real.sqrt 2 / 32\n\n"
    "def f (x : ℝ) : ℝ := x ^ 2 + 1\n\n"
    "instance : Fact (1 < 2) := ⟨by norm_num⟩\n\n"
    "namespace Geo\n\n"
)
PREAMBLE_SIGNATURE = "theorem p (x : ℝ) (hx : f x = solution) : 0 < f x := by"
PREAMBLE_STATEMENT = GOEDEL_HEADER + PREAMBLE + PREAMBLE_SIGNATURE + " sorry"


def preamble_code(
    proof: str = "  positivity", *, preamble: str = PREAMBLE, before_theorem: str = ""
) -> str:
    """A candidate for the preamble problem as the model writes it: header, its copy of the
    preamble, what it adds before the theorem, the theorem, the proof."""
    return GOEDEL_HEADER + preamble + before_theorem + PREAMBLE_SIGNATURE + "\n" + proof


def make_opening(**overrides: Any) -> EngineOpening:
    """An engine opening for the tiny model's tests: neutral sampling at temperature 1, seed 1,
    a 4096-token window, a commit every 2 results."""
    fields: dict[str, Any] = {
        "model_path": Path("tiny"),
        "model_rev": "tiny-rev",
        "sampling": SamplingSettings(temperature=1.0, top_p=0.95, top_k=0),
        "max_model_len": 4096,
        "seed": 1,
        "workdir": Path("engines"),
        "commit_every": 2,
        "cpu_threads": 1,
    }
    return EngineOpening(**{**fields, **overrides})


def make_problem(problem_id: str = "p1", statement: str = STATEMENT, **overrides: Any) -> Problem:
    fields: dict[str, Any] = {
        "problem_id": problem_id,
        "source": "test",
        "split": "test",
        "formal_statement": statement,
        "informal_prefix": "",
        "statement_sha": statement_sha(statement),
        "alpha_sha": alpha_sha(statement),
        "header": GOEDEL_HEADER.strip(),
    }
    fields.update(overrides)
    return Problem(**fields)


def make_generation(
    problem_id: str = "p1",
    sample_idx: int = 0,
    *,
    round: int = 0,
    cap_tokens: int = 64,
    completion_ids: list[int] | None = None,
    completion_text: str = "plan\n```lean4\ntheorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by\n  omega\n```",
    finish_reason: str = "stop",
    max_tokens: int | None = None,
    lean_code: str | None = "auto",
    lean_code_error: str | None = None,
    parent: ParentRef | None = None,
    **overrides: Any,
) -> Generation:
    from prover_assets.lean.extract import extract_lean_code

    completion_ids = [5, 6, 7] if completion_ids is None else completion_ids
    max_tokens = cap_tokens if max_tokens is None else max_tokens
    if lean_code == "auto":
        lean_code = extract_lean_code(completion_text)
    if round > 0 and parent is None:
        parent = ParentRef(
            problem_id=problem_id, sample_idx=0, round=round - 1, cap_tokens=cap_tokens
        )
    fields: dict[str, Any] = {
        "problem_id": problem_id,
        "sample_idx": sample_idx,
        "round": round,
        "cap_tokens": cap_tokens,
        "prompt_ids": [1, 2, 3],
        "completion_ids": completion_ids,
        "prompt_text": "<prompt>",
        "completion_text": completion_text,
        "finish_reason": finish_reason,
        "lean_code": lean_code,
        "lean_code_error": lean_code_error,
        "context_clipped": max_tokens < cap_tokens,
        "messages": [Message(role="user", content="prove it")],
        "model_path": "/models/m",
        "model_rev": "0" * 40,
        "sampling": make_sampling(max_tokens=max_tokens),
        "parent": parent,
    }
    fields.update(overrides)
    return Generation(**fields)


# The registered sampling's every field, written out by hand (no cut, no penalty): what each
# request must carry and each record hold
REGISTERED_SAMPLING_SENT = {
    "temperature": 1.0,
    "top_p": 0.95,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


def make_sampling(**overrides: Any) -> Sampling:
    """A sample's sampling with every field its request carried."""
    fields: dict[str, Any] = {**REGISTERED_SAMPLING_SENT, "max_tokens": 64, "seed": 1}
    fields.update(overrides)
    return Sampling(**fields)


def make_pins(**overrides: Any) -> Pins:
    fields: dict[str, Any] = {
        "lean_version": "v4.9.0-rc1",
        "mathlib_rev": "d1d1e4b7",
        "repl_rev": "7df77c0a",
        "backend": "local",
        "simulated": False,
    }
    fields.update(overrides)
    return Pins(**fields)


def make_verification(
    generation: Generation | None = None,
    *,
    accepted: bool = True,
    stage: Stage | None = None,
    reasons: list[str] | None = None,
    pins: Pins | None = None,
    **overrides: Any,
) -> Verification:
    generation = generation or make_generation()
    stage = stage or (Stage.ACCEPTED if accepted else Stage.COMPILE_ERROR)
    reasons = [] if accepted else (reasons or ["compile_error"])
    fields: dict[str, Any] = {
        "problem_id": generation.problem_id,
        "sample_idx": generation.sample_idx,
        "round": generation.round,
        "cap_tokens": generation.cap_tokens,
        "accepted": accepted,
        "reasons": reasons,
        "verify_s": 0.5,
        "budget_s": 180.0,
        "verifier": VerifierInfo(pins=pins or make_pins(), config=VERIFIER_CONFIG, workers=1),
        "code_sha256": code_sha256(generation.lean_code),
        "stage": stage,
        "diagnostics": {},
    }
    fields.update(overrides)
    return Verification(**fields)


def preflight_config(data_root: Path) -> RunConfig:
    """The shipped demo config, writing under `data_root`, as the preflight reads it."""
    return parse_run_config(full_demo_run_config(data_root), "test config")


def fake_workspace(folder: Path, *, mathlib: str = "a" * 40, repl: str = "b" * 40) -> Path:
    """A folder with the two files the pins are read from (no Lean in it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lean-toolchain").write_text("leanprover/lean4:v4.9.0-rc1\n")
    manifest = {"packages": [{"name": "mathlib", "rev": mathlib}, {"name": "REPL", "rev": repl}]}
    (folder / "lake-manifest.json").write_text(json.dumps(manifest))
    return folder


def with_local_lean(raw: dict, workspace: Path, **settings: Any) -> dict:
    """`raw` with the local Lean backend on `workspace` (no sandbox) and `settings`."""
    raw = copy.deepcopy(raw)
    raw["resources"]["lean"]["config"]["settings"] = {
        "local": {"workspace": str(workspace), "sandbox": False, **settings}
    }
    return raw


def training_spec(**changes: Any) -> TrainingSpec:
    """The shipped demo's training section with `changes`."""
    shipped = full_demo_run_config(Path("data"))["resources"]["experiment"]["config"]["spec"]
    return TrainingSpec(**(shipped["training"] | changes))


def registered_like(tmp_path: Path, *, attention: str | None = None, **training: Any) -> RunConfig:
    """The demo's sections with the registered gpu settings: vLLM on eight GPUs (and, when
    given, `training.attention` and other `training` fields)."""
    raw = full_demo_run_config(tmp_path / "data")
    raw["resources"]["gpu"]["config"]["settings"] = {
        "engine": "vllm",
        "device": "cuda",
        "dtype": "bfloat16",
        "gpus": list(range(8)),
    }
    if attention is not None:
        training["attention"] = attention
    raw["resources"]["experiment"]["config"]["spec"]["training"].update(training)
    return parse_run_config(raw, "test config")


def finish_step_folder(
    folder: Path, name: str, *, counts: dict | None = None, extra: dict | None = None
) -> Path:
    """A step's folder whose one output `name` is already written: its manifest, as the step
    would write it last, with `counts` (its result) and `extra` (e.g. `usage`)."""
    manifest = build_manifest(
        folder=folder,
        asset=str(folder),
        inputs=[],
        outputs=[folder / name],
        config={},
        counts=counts or {},
        started_at="t",
        extra=extra,
    )
    write_manifest(folder, manifest)
    return folder / name


def make_training_result(**overrides: Any) -> TrainingResult:
    """A finished training run's counts: 2 rows, one epoch, 2 micro-steps each once, on CPU."""
    fields: dict[str, Any] = {
        "status": "completed",
        "global_step": 2,
        "max_steps": 2,
        "resumed_from_step": 0,
        "removed_partial_checkpoints": [],
        "trained_micro_steps_this_run": 2,
        "tokens_per_s_this_run": None,
        "micro_steps": 2,
        "packing_efficiency": 1.0,
        "rows": 2,
        "epochs": 1,
        "bf16": False,
        "wall_s_this_run": 1.0,
    }
    fields.update(overrides)
    return TrainingResult(**fields)


def make_sft_row(
    input_ids: list[int], prompt_len: int, sample_idx: int = 0, **overrides: Any
) -> SftRow:
    """A round-0 SFT row of `input_ids` whose first `prompt_len` tokens are the prompt (the
    rest its completion), of problem `p<sample_idx>`."""
    fields: dict[str, Any] = {
        "input_ids": input_ids,
        "prompt_len": prompt_len,
        "kind": "first",
        "round": 0,
        "sample_idx": sample_idx,
        "cap_tokens": 64,
        "n_completion": len(input_ids) - prompt_len,
        "proof_sha": "a" * 64,
        "model_rev": "r",
        "problem_id": f"p{sample_idx}",
    }
    return SftRow(**(fields | overrides))


def make_paired(
    problem_id: str, baseline: tuple[int, int, bool], candidate: tuple[int, int, bool], cell: Cell
) -> PairedProblem:
    """One problem's row of a comparison: each side's (accepted c, samples n, solved@k)."""
    return PairedProblem(
        problem_id=problem_id,
        baseline=ProblemSide(c=baseline[0], n=baseline[1], solved=baseline[2]),
        candidate=ProblemSide(c=candidate[0], n=candidate[1], solved=candidate[2]),
        cell=cell,
    )


def make_interval(estimate: float = 0.0, low: float = 0.0, high: float = 0.0) -> Interval:
    return Interval(estimate, low, high, "paired cluster bootstrap", 100, 1, 0.95)


def make_side(system: str, solved: int, problems: int = 4, **overrides: Any) -> ComparedSystem:
    """One side of a comparison: `solved` of `problems`, made by runs of no interest here."""
    made = MadeBy(run_id=None, started_at="t0", finished_at="t1")
    fields: dict[str, Any] = {
        "system": system,
        "model_revs": ["r"],
        "problems": problems,
        "solved_at_k": solved,
        "wilson": (0.1, 0.9),
        "provenance": RunProvenance(generations=made, verdicts=made),
    }
    return ComparedSystem(**(fields | overrides))


def make_comparison(**overrides: Any) -> Comparison:
    """A secondary comparison on minif2f at cap 64, k 2, both systems solving 2 of 4, no
    per-problem rows; `overrides` set any field (an `ExploratoryComparison` when `iteration`,
    `seed`, `against` and `what` are among them, a `RegisteredComparison` when `endpoint` and
    `without_known_defects` are)."""
    fields: dict[str, Any] = {
        "eval_set": "minif2f",
        "cap": 64,
        "k": 2,
        "table": McNemarTable(both=2, baseline_only=0, candidate_only=0, neither=2),
        "p_value": 1.0,
        "alpha": 0.05,
        "decision": "no detectable improvement",
        "pass1_difference": make_interval(),
        "solved_difference": make_interval(),
        "per_problem": [],
        "primary": False,
        "secondary_reasons": ["made by a test"],
        "design_override": None,
        "baseline": make_side("baseline", 2),
        "candidate": make_side("candidate", 2),
    }
    fields |= overrides
    kind = (
        ExploratoryComparison
        if "iteration" in fields
        else RegisteredComparison
        if "endpoint" in fields
        else Comparison
    )
    return kind(**fields)


def timeout_recheck(second: Stage = Stage.ACCEPTED, first_s: float = 180.0) -> dict[str, Any]:
    """A verdict's diagnostics after its timeout was run again (`batching._with_both_attempts`):
    the first attempt timed out after `first_s`, the second ended `second`."""
    return {
        "timeout_recheck": {
            "first": {"stage": Stage.TIMEOUT, "verify_s": first_s},
            "second": {"stage": second, "verify_s": 3.0},
        }
    }
