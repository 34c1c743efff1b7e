"""Seam assertions of a finished round, on the real files of a data root.

Each function checks one hand-over between stages and raises `SeamBroken` saying what is wrong.
They read the files with `json` and `numpy` directly and re-derive what they compare (hashes,
key sets, loss masks), so a bug in the project's own readers cannot hide a broken seam. The
training-input seam deliberately uses the trainer's own `pack` and `SftDataset`: the seam is
what the trainer was fed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "SeamBroken",
    "check_candidate_is_the_export",
    "check_export_reproduces_adapter",
    "check_generations_match_verdicts",
    "check_no_truncated_sample_accepted",
    "check_report_is_secondary_and_simulated",
    "check_sft_rows_are_accepted_samples",
    "check_training_order",
    "report_folder",
]

NO_CODE_SHA = hashlib.sha256(b"\x00no_code").hexdigest()
IGNORE = -100


class SeamBroken(AssertionError):
    pass


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def sample_key(row: dict[str, Any]) -> tuple:
    return (row["problem_id"], row["sample_idx"], row["round"], row["cap_tokens"])


def _by_key(rows: list[dict[str, Any]], path: Path) -> dict[tuple, dict[str, Any]]:
    keyed = {sample_key(r): r for r in rows}
    if len(keyed) != len(rows):
        duplicated = [k for k, n in Counter(map(sample_key, rows)).items() if n > 1]
        raise SeamBroken(f"{path}: {len(rows) - len(keyed)} duplicated keys, e.g. {duplicated[0]}")
    return keyed


def check_generations_match_verdicts(generations: Path, verdicts: Path) -> int:
    """Same key sets; each verdict pins the sha256 of its generation's extracted code."""
    by_gen = _by_key(jsonl(generations), generations)
    by_verdict = _by_key(jsonl(verdicts), verdicts)
    if by_gen.keys() != by_verdict.keys():
        missing, extra = by_gen.keys() - by_verdict.keys(), by_verdict.keys() - by_gen.keys()
        raise SeamBroken(
            f"{verdicts}: {len(missing)} generations without a verdict, {len(extra)} verdicts "
            f"without a generation (e.g. {sorted(missing or extra)[0]})"
        )
    for key, generation in by_gen.items():
        code = generation["lean_code"]
        expected = NO_CODE_SHA if code is None else hashlib.sha256(code.encode()).hexdigest()
        if by_verdict[key]["code_sha256"] != expected:
            raise SeamBroken(
                f"{verdicts}: {key} pins {by_verdict[key]['code_sha256'][:12]}, "
                f"its generation's code hashes to {expected[:12]}"
            )
    return len(by_gen)


def check_no_truncated_sample_accepted(generations: Path, verdicts: Path) -> int:
    """An accepted proof finished on its own (no length cap, no clipped context)."""
    by_gen = _by_key(jsonl(generations), generations)
    accepted = [v for v in jsonl(verdicts) if v["accepted"]]
    for verdict in accepted:
        generation = by_gen[sample_key(verdict)]
        if generation["finish_reason"] != "stop" or generation["context_clipped"]:
            raise SeamBroken(
                f"{verdicts}: {sample_key(verdict)} is accepted but its sample was truncated "
                f"(finish_reason {generation['finish_reason']}, "
                f"context_clipped {generation['context_clipped']})"
            )
    return len(accepted)


def _accepted_samples(pool_rounds: list[tuple[Path, Path]]) -> dict[tuple, dict[str, Any]]:
    samples = {}
    for generations, verdicts in pool_rounds:
        by_gen = _by_key(jsonl(generations), generations)
        for verdict in jsonl(verdicts):
            if verdict["accepted"]:
                samples[sample_key(verdict)] = by_gen[sample_key(verdict)]
    return samples


def check_sft_rows_are_accepted_samples(
    shards: Path, data_order: Path, pool_rounds: list[tuple[Path, Path]]
) -> int:
    """Every row the trainer was fed is an accepted pool sample: its context is the sample's
    `prompt_ids` and its loss tokens are exactly the sample's `completion_ids`."""
    from prover_assets.sft.shards import SftDataset, pack

    accepted = _accepted_samples(pool_rounds)
    index = jsonl(shards / "rows.jsonl")
    dataset = SftDataset(shards)
    fed = 0
    for entry in jsonl(data_order):
        batch = pack(dataset, entry["rows"])
        starts = [int(i) for i in np.flatnonzero(batch.position_ids == 0)]
        ends = [*starts[1:], len(batch.input_ids)]
        if len(starts) != len(entry["rows"]):
            raise SeamBroken(
                f"micro-step {entry['micro_step']}: {len(starts)} sequences packed "
                f"for {len(entry['rows'])} rows"
            )
        for row, start, end in zip(entry["rows"], starts, ends, strict=True):
            key = sample_key(index[row])
            sample = accepted.get(key)
            if sample is None:
                raise SeamBroken(f"SFT row {row} is {key}, which is not an accepted pool sample")
            ids, labels = batch.input_ids[start:end], batch.labels[start:end]
            context = ids[labels == IGNORE].tolist()
            loss_tokens = ids[labels != IGNORE].tolist()
            if ids.tolist() != sample["prompt_ids"] + sample["completion_ids"]:
                raise SeamBroken(f"SFT row {row} ({key}): tokens differ from the sample's")
            if context != sample["prompt_ids"] or loss_tokens != sample["completion_ids"]:
                raise SeamBroken(
                    f"SFT row {row} ({key}): context of {len(context)} and loss on {len(loss_tokens)} "
                    f"tokens, the sample has {len(sample['prompt_ids'])} prompt and "
                    f"{len(sample['completion_ids'])} completion tokens"
                )
            fed += 1
    return fed


def check_training_order(data_order: Path, *, micro_steps: int, rows: int, epochs: int) -> None:
    """Each micro-step trained once, in order; every row exactly `epochs` times."""
    entries = jsonl(data_order)
    steps = [e["micro_step"] for e in entries]
    if steps != list(range(micro_steps)):
        repeated = [s for s, n in Counter(steps).items() if n > 1]
        raise SeamBroken(
            f"{data_order}: micro-steps are not 0..{micro_steps - 1} once each "
            f"({len(steps)} entries; repeated {repeated[:5]}; missing "
            f"{sorted(set(range(micro_steps)) - set(steps))[:5]})"
        )
    seen = Counter(r for e in entries for r in e["rows"])
    wrong = {row: seen.get(row, 0) for row in range(rows) if seen.get(row, 0) != epochs}
    if wrong or set(seen) - set(range(rows)):
        raise SeamBroken(
            f"{data_order}: rows not seen exactly {epochs} times: {dict(list(wrong.items())[:5])}"
        )


def _token_logprobs(model, ids: list[int]) -> Any:
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def check_export_reproduces_adapter(
    base_model: Path, adapter: Path, exported_model: Path, ids: list[int], *, tolerance: float
) -> float:
    """The merged export gives the base + adapter's token logprobs (fp32, within `tolerance`)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapted = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32), adapter
    ).eval()
    merged = AutoModelForCausalLM.from_pretrained(exported_model, dtype=torch.float32).eval()
    difference = float((_token_logprobs(adapted, ids) - _token_logprobs(merged, ids)).abs().max())
    if difference > tolerance:
        raise SeamBroken(
            f"{exported_model}: token logprobs differ from base + adapter by "
            f"{difference:.3g} (tolerance {tolerance})"
        )
    return difference


def weights_revision(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for shard in sorted(p for p in model_dir.iterdir() if p.suffix in (".safetensors", ".bin")):
        digest.update(f"{shard.name}\t{hashlib.sha256(shard.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def check_candidate_is_the_export(candidate_generations: Path, exported_model: Path) -> str:
    """The candidate was sampled from the exported weights, byte for byte."""
    revision = f"sft-{weights_revision(exported_model)}"
    revisions = {g["model_rev"] for g in jsonl(candidate_generations)}
    if revisions != {revision}:
        raise SeamBroken(
            f"{candidate_generations}: sampled from {sorted(revisions)}, the exported "
            f"weights are {revision}"
        )
    return revision


def report_folder(root: Path) -> Path:
    """The one report of the finished round under data root `root`."""
    (folder,) = (root / "eval_report").glob("report-*")
    return folder


def check_report_is_secondary_and_simulated(report_dir: Path) -> None:
    """A simulated run's report says so first, and no comparison in it is PRIMARY."""
    summary = json.loads((report_dir / "summary.json").read_text(encoding="utf-8"))
    text = (report_dir / "report.md").read_text(encoding="utf-8")
    if summary["simulated"] is not True:
        raise SeamBroken(f"{report_dir}: summary.json does not say simulated")
    if not text.startswith("# SIMULATED - NOT EVIDENCE"):
        raise SeamBroken(f"{report_dir}: report.md does not open with SIMULATED - NOT EVIDENCE")
    primary = [c for c in summary["comparisons"] if c["primary"]]
    if primary or "PRIMARY" in text:
        raise SeamBroken(f"{report_dir}: a simulated report calls a comparison PRIMARY")
