"""The preflight's checks of the model: its folder's files, its revision, and the prompt its
tokenizer renders for a golden problem, byte for byte the registered one."""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from pathlib import Path

from prover_assets.generation.prompts import render_prompt, round0_messages
from prover_assets.generation.revision import model_revision
from prover_assets.preflight.model import (
    CheckStatus,
    Measurement,
    PreflightCheck,
    passed_or_failed,
    timed,
)
from prover_assets.problems.eval_sets import load_minif2f

__all__ = [
    "GOLDEN_PROBLEM",
    "GOLDEN_PROMPT",
    "ModelFiles",
    "golden_prompt",
    "golden_prompt_check",
    "model_files",
    "model_files_check",
    "model_revision_check",
]

GOLDEN_PROBLEM = "mathd_algebra_478"  # the first miniF2F problem of the shipped copy
GOLDEN_PROMPT = f"golden/minif2f-{GOLDEN_PROBLEM}.prompt.txt"  # under prover_assets/data


@dataclass(frozen=True)
class ModelFiles:
    """What a model folder holds: weight shards, tokenizer files, and its chat template's
    file (None without one)."""

    weights: list[str]
    tokenizer: list[str]
    chat_template: str | None


def model_files(folder: Path) -> ModelFiles:
    """What a model folder holds of weights, tokenizer and chat template."""
    weights = sorted(p.name for p in folder.glob("*.safetensors"))
    tokenizer = sorted(
        name
        for name in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")
        if (folder / name).is_file()
    )
    template = None
    if (folder / "chat_template.jinja").is_file():
        template = "chat_template.jinja"
    elif (folder / "tokenizer_config.json").is_file():
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        template = "tokenizer_config.json" if config.get("chat_template") else None
    return ModelFiles(weights, tokenizer, template)


def model_files_check(folder: Path) -> PreflightCheck:
    """`model.files`: the model folder holds weights, a tokenizer and a chat template."""
    remedy = (
        "download the whole snapshot (weights *.safetensors, tokenizer.json, tokenizer_config.json "
        "with its chat template) into model.path"
    )
    threshold = "weights, a tokenizer and a chat template"

    def measure() -> Measurement:
        found = model_files(folder)
        missing = [
            what
            for what, present in (
                ("weights", found.weights),
                (
                    "tokenizer",
                    "tokenizer_config.json" in found.tokenizer and len(found.tokenizer) > 1,
                ),
                ("chat template", found.chat_template),
            )
            if not present
        ]
        text = (
            f"{len(found.weights)} weight shards, tokenizer {found.tokenizer}, chat template in "
            f"{found.chat_template}"
        )
        return Measurement(
            passed_or_failed(not missing),
            text + (f"; missing: {', '.join(missing)}" if missing else ""),
        )

    return timed("model.files", threshold, remedy, measure)


def model_revision_check(folder: Path, declared: str | None) -> PreflightCheck:
    """`model.revision`: the folder is the revision the config declares, or the one this
    project recorded for it, checked against its weights."""
    threshold = (
        f"the folder is model.revision {declared}"
        if declared
        else "the revision this project recorded matches the weights"
    )
    remedy = "download the revision the config names, or correct model.revision"

    def measure() -> Measurement:
        return Measurement(CheckStatus.PASSED, f"{folder} is {model_revision(folder, declared)}")

    return timed("model.revision", threshold, remedy, measure)


def golden_prompt() -> tuple[str, str]:
    """The golden problem's statement (from the shipped miniF2F) and its golden rendered prompt."""
    data = Path(str(importlib.resources.files("prover_assets") / "data"))
    problems = load_minif2f(data / "goedel-prover-v2" / "minif2f.jsonl")
    statement = next(p.formal_statement for p in problems if p.problem_id == GOLDEN_PROBLEM)
    return statement, (data / GOLDEN_PROMPT).read_text(encoding="utf-8")


def golden_prompt_check(tokenizer_folder: Path) -> PreflightCheck:
    """`prompt.golden`: the tokenizer's chat template renders the golden problem's prompt
    byte for byte as the baseline was evaluated with."""
    threshold = f"the render of miniF2F {GOLDEN_PROBLEM} byte-identical to prover_assets/data/{GOLDEN_PROMPT}"
    remedy = (
        "the model's chat template renders another prompt than the baseline was evaluated with: "
        "use the registered snapshot's tokenizer_config.json (its chat_template) unchanged"
    )

    def measure() -> Measurement:
        from transformers import AutoTokenizer

        statement, golden = golden_prompt()
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
        rendered, _ = render_prompt(tokenizer, round0_messages(statement))
        if rendered == golden:
            return Measurement(CheckStatus.PASSED, f"identical ({len(golden.encode())} bytes)")
        at = next(
            (i for i, (a, b) in enumerate(zip(rendered, golden, strict=False)) if a != b),
            min(len(rendered), len(golden)),
        )
        return Measurement(
            CheckStatus.FAILED,
            f"differs at character {at}: rendered {rendered[max(at - 20, 0) : at + 20]!r}, golden "
            f"{golden[max(at - 20, 0) : at + 20]!r}",
        )

    return timed("prompt.golden", threshold, remedy, measure)
