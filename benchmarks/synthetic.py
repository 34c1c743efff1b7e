"""Synthetic round-0 samples shared by the benchmarks; every benchmark that uses them says so."""

from __future__ import annotations

from prover_assets.records import (
    Generation,
    Message,
    Pins,
    Sampling,
    SamplingSettings,
    Stage,
    Verification,
    VerifierInfo,
    code_sha256,
)

CAP_TOKENS = 16384
SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)
REGISTERED_PINS = Pins(
    lean_version="v4.9.0-rc1",
    mathlib_rev="d1d1e4b7",
    repl_rev="7df77c0a",
    backend="local",
    simulated=False,
)


def verifier_info(config: dict) -> VerifierInfo:
    return VerifierInfo(pins=REGISTERED_PINS, config=config, workers=8)


def round0_sample(
    problem_id: str,
    sample_idx: int,
    *,
    code: str,
    completion_text: str,
    prompt_ids: list[int],
    completion_ids: list[int],
    messages: list[Message],
    model_rev: str,
    rejection: str | None,
    verifier: VerifierInfo,
) -> tuple[Generation, Verification]:
    """One sampled completion and its verdict: accepted when `rejection` is None."""
    generation = Generation(
        problem_id=problem_id,
        sample_idx=sample_idx,
        round=0,
        cap_tokens=CAP_TOKENS,
        prompt_ids=prompt_ids,
        completion_ids=completion_ids,
        prompt_text="<prompt>",
        completion_text=completion_text,
        finish_reason="stop",
        lean_code=code,
        lean_code_error=None,
        context_clipped=False,
        messages=messages,
        model_path="/models/base",
        model_rev=model_rev,
        sampling=Sampling(**SAMPLING.carried(), max_tokens=CAP_TOKENS, seed=sample_idx),
        parent=None,
    )
    verdict = Verification(
        problem_id=problem_id,
        sample_idx=sample_idx,
        round=0,
        cap_tokens=CAP_TOKENS,
        accepted=rejection is None,
        reasons=[] if rejection is None else [rejection],
        verify_s=1.0,
        budget_s=180.0,
        verifier=verifier,
        code_sha256=code_sha256(code),
        stage=Stage.ACCEPTED if rejection is None else Stage.COMPILE_ERROR,
        # as the verifier writes every accepted verdict: the SFT builder refuses one without it
        diagnostics={"displayed_statement_faithful": True} if rejection is None else {},
    )
    return generation, verdict
