"""The record contract (design section 2): field names, types, and the cross-field rules.

Every record is a frozen, strict pydantic model: no extra fields, no type coercion (`"1"` is not
an int, `1` is not a bool). Readers validate every line through these models.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from prover_assets.lean.signature import theorem_signature
from prover_assets.lean.statements import alpha_sha, statement_sha
from prover_assets.records.reasons import Reason, reason_kind

__all__ = [
    "SCHEMA_VERSION",
    "AttemptOutcome",
    "CachedFrom",
    "Generation",
    "Message",
    "ParentRef",
    "Pins",
    "Problem",
    "Reason",
    "SampleKey",
    "Sampling",
    "SamplingSettings",
    "SftRow",
    "Stage",
    "TimeoutRecheck",
    "VerdictDiagnostics",
    "Verification",
    "VerifierInfo",
    "reason_kind",
]

SCHEMA_VERSION = 1

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NonEmpty = Annotated[str, Field(min_length=1)]
# An id that differs from another only by a space at an end or a byte-order mark would join
# nothing it should: not empty, no whitespace at either end, no BOM anywhere.
ProblemId = Annotated[str, Field(pattern=r"^[^\s\x{feff}](?:[^\x{feff}]*[^\s\x{feff}])?$")]
NonNegative = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(gt=0)]
# Checked while the JSON is parsed (in pydantic-core): a Python pass over every id costs more.
TokenIds = list[NonNegative]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION


class SampleKey(NamedTuple):
    """One sample, unique within a file: a tuple (a dict key, equal to a key read back as a
    plain tuple) whose parts have names."""

    problem_id: str
    sample_idx: int
    round: int
    cap_tokens: int

    def __repr__(self) -> str:  # as the tuple it is, in every message that names a sample
        return repr(tuple(self))


class ParentRef(BaseModel):
    """A correction's parent sample, as the record holds it (an object, one field per part)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    problem_id: ProblemId
    sample_idx: NonNegative
    round: NonNegative
    cap_tokens: Positive

    @classmethod
    def of(cls, key: SampleKey) -> ParentRef:
        return cls(**key._asdict())

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.problem_id, self.sample_idx, self.round, self.cap_tokens)


class Problem(_Record):
    """One problem: its statement (header and theorem, `:= by sorry`), hashes and source."""

    problem_id: ProblemId
    source: NonEmpty
    split: str
    formal_statement: NonEmpty  # full header + one theorem, ending `:= by sorry`
    informal_prefix: str
    statement_sha: Sha256
    alpha_sha: Sha256
    header: str

    @property
    def key(self) -> str:
        return self.problem_id

    @model_validator(mode="after")
    def _statement_is_bare_and_hashed(self) -> Problem:
        if not self.formal_statement.endswith(":= by sorry"):
            raise ValueError("formal_statement must end with ':= by sorry'")
        signature = theorem_signature(self.formal_statement)
        if signature is None:
            raise ValueError("formal_statement has no `theorem <name> ... :=`")
        if self.statement_sha != statement_sha(self.formal_statement):
            raise ValueError("statement_sha does not match formal_statement")
        if self.alpha_sha != alpha_sha(self.formal_statement):
            raise ValueError("alpha_sha does not match formal_statement")
        return self


class Message(BaseModel):
    """One chat message of a prompt."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
)


@dataclass(frozen=True)
class SamplingSettings:
    """Every sampling field of every sample of a batch, each sent explicitly. The defaults are
    the neutral values (no cut, no penalty): the registered design names only temperature,
    top-p and top-k, and means nothing else changes the distribution."""

    temperature: float
    top_p: float
    top_k: int  # 0: no top-k cut (vLLM's and transformers' "disabled")
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self) -> None:
        if tuple(f.name for f in fields(self)) != SAMPLING_FIELDS:
            raise TypeError("SamplingSettings must name exactly the recorded sampling fields")

    def carried(self) -> dict[str, float | int]:
        """The fields as a request carries them, named as the record names them."""
        return asdict(self)


class Sampling(BaseModel):
    """How one sample was drawn: every sampling field its request carried, its token budget
    and its seed. A field that is None was not in the request: whatever served it filled it
    with its own default (`vllm serve` the model's `generation_config.json`), so the value it
    sampled with is unknown and the sample cannot be paired. `top_k` 0 is no top-k cut."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    temperature: Annotated[float, Field(ge=0)] | None
    top_p: Annotated[float, Field(gt=0, le=1)] | None
    top_k: NonNegative | None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    max_tokens: NonNegative  # the effective completion budget of this sample
    seed: int

    @property
    def values(self) -> tuple[float | int | None, ...]:
        """The sampling fields' values, in `SAMPLING_FIELDS` order."""
        return tuple(getattr(self, name) for name in SAMPLING_FIELDS)

    @property
    def unset(self) -> tuple[str, ...]:
        """The sampling fields the request left to the server's default."""
        return tuple(name for name in SAMPLING_FIELDS if getattr(self, name) is None)


class Generation(_Record):
    """One generated sample: key, prompt, completion, extracted Lean code, sampling and model."""

    problem_id: ProblemId
    sample_idx: NonNegative
    round: NonNegative
    cap_tokens: Positive
    prompt_ids: Annotated[TokenIds, Field(min_length=1)]
    completion_ids: TokenIds
    prompt_text: str
    completion_text: str
    # `no_room`: the prompt left no room for a completion within the context window.
    finish_reason: Literal["stop", "length", "no_room"]
    lean_code: str | None  # header + the extracted block, as the model displayed it
    lean_code_error: str | None  # why the code cannot be re-inserted into the statement
    context_clipped: bool
    messages: Annotated[list[Message], Field(min_length=1)]
    model_path: NonEmpty
    model_rev: NonEmpty
    sampling: Sampling
    parent: ParentRef | None

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.problem_id, self.sample_idx, self.round, self.cap_tokens)

    @property
    def hit_cap(self) -> bool:
        """Cut at its token budget: the model did not stop by itself."""
        return self.finish_reason == "length"

    @property
    def design_identity(self) -> tuple:
        """What must be equal between two systems' samples of one key for them to be compared
        as a pair: the prompt (messages, text and token ids), every sampling field the request
        carried, and the cap. The one definition the design check and the report use."""
        return (
            tuple((m.role, m.content) for m in self.messages),
            self.prompt_text,
            tuple(self.prompt_ids),
            self.sampling.values,
            self.cap_tokens,
        )

    @model_validator(mode="after")
    def _contract(self) -> Generation:
        max_tokens = self.sampling.max_tokens
        n_completion = len(self.completion_ids)
        if max_tokens > self.cap_tokens:
            raise ValueError(f"sampling.max_tokens {max_tokens} > cap_tokens {self.cap_tokens}")
        if n_completion > max_tokens:
            raise ValueError(f"{n_completion} completion tokens > sampling.max_tokens {max_tokens}")
        if self.hit_cap and n_completion != max_tokens:
            raise ValueError(
                f"finish_reason 'length' with {n_completion} tokens, not max_tokens {max_tokens}"
            )
        if self.context_clipped != (max_tokens < self.cap_tokens):
            raise ValueError("context_clipped must say whether max_tokens < cap_tokens")
        if (self.finish_reason == "no_room") != (max_tokens == 0):
            raise ValueError("finish_reason 'no_room' exactly when max_tokens is 0")
        if self.lean_code is None and self.lean_code_error is not None:
            raise ValueError("lean_code_error without lean_code")
        if (self.round == 0) != (self.parent is None):
            raise ValueError("round 0 samples have no parent; correction samples must have one")
        if self.parent is not None and (
            self.parent.problem_id != self.problem_id
            or self.parent.round != self.round - 1
            or self.parent.cap_tokens != self.cap_tokens
        ):
            raise ValueError(
                "parent must be a sample of the same problem and cap, one round earlier"
            )
        if self.messages[-1].role != "user":
            raise ValueError("the last message of a prompt must be the user's")
        return self


class Stage(StrEnum):
    """What a verdict is. Only ACCEPTED accepts; INFRASTRUCTURE is not a judgement of the proof."""

    ACCEPTED = "accepted"
    NO_CODE = "no_code"
    REINSERTION = "reinsertion"
    GATE = "gate"
    COMPILE_ERROR = "compile_error"
    INCOMPLETE = "incomplete"
    TIMEOUT = "timeout"
    AXIOM = "axiom"
    STATEMENT_CHANGED = "statement_changed"  # the proven constant is not the trusted statement
    # Text Lean did not write was read as its answer: what the proof's code printed.
    FORGED_OUTPUT = "forged_output"
    INFRASTRUCTURE = "infrastructure"


class Pins(BaseModel):
    """The verifier's toolchain: Lean, Mathlib and REPL revisions, backend, and whether it is
    simulated."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    lean_version: NonEmpty
    mathlib_rev: NonEmpty
    repl_rev: NonEmpty
    backend: NonEmpty
    simulated: bool  # true only for the demo's simulated verifier: never evidence


class VerifierInfo(BaseModel):
    """The verifier a verdict came from: its pins, policy and configuration."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    pins: Pins
    config: dict[str, Any]
    workers: Positive


class CachedFrom(BaseModel):
    """The verdict a cached verdict copies: its cache key and its sample."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    key: Sha256
    problem_id: ProblemId
    sample_idx: NonNegative
    round: NonNegative
    cap_tokens: Positive


class AttemptOutcome(BaseModel):
    """How one Lean attempt of a verdict ended: its stage and its seconds."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    stage: Stage
    verify_s: Annotated[float, Field(ge=0)]


class TimeoutRecheck(BaseModel):
    """A verdict judged twice: the first attempt timed out, the second is the verdict's."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    first: AttemptOutcome
    second: AttemptOutcome


class VerdictDiagnostics(BaseModel):
    """What the verifier noted beside a verdict, each field where it applies (written only
    then: a field that does not apply is absent from the record, not null)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # the theorem the code displays is the problem's, token for token (read before Lean ran)
    displayed_statement_faithful: bool | None = None
    code_chars: NonNegative | None = None
    attempts: NonNegative | None = None  # Lean runs of its job (retries included)
    worker: NonNegative | None = None  # the worker that judged it
    warnings: NonNegative | None = None  # Lean's warnings on a complete proof
    axioms: list[str] | None = None  # `#print axioms` of the theorem
    statement_check: str | None = None  # the check command, where the statement changed
    statement_errors: list[str] | None = None  # what it answered
    failure_detail: str | None = None  # an infrastructure failure's exit and stderr
    timeout_recheck: TimeoutRecheck | None = None
    prior_attempts: Positive | None = None  # infrastructure verdicts of it set aside before

    @model_serializer(mode="wrap")
    def _written_where_they_apply(self, handler: SerializerFunctionWrapHandler) -> dict:
        return {name: value for name, value in handler(self).items() if value is not None}


class Verification(_Record):
    """One verdict: key, the code's sha256, stage, reasons, diagnostics and the verifier."""

    problem_id: ProblemId
    sample_idx: NonNegative
    round: NonNegative
    cap_tokens: Positive
    accepted: bool
    reasons: list[Reason]
    verify_s: Annotated[float, Field(ge=0)]
    budget_s: Annotated[float, Field(gt=0)]
    verifier: VerifierInfo
    code_sha256: Sha256
    stage: Stage
    diagnostics: VerdictDiagnostics
    repl_errors: list[dict[str, Any]] | None = None  # with feedback: the REPL's error messages
    repl_code: str | None = None  # with feedback: the compile view the error positions index
    cached_from: CachedFrom | None = None  # a copy of this verdict, not a measurement

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.problem_id, self.sample_idx, self.round, self.cap_tokens)

    @property
    def copied(self) -> bool:
        """Copied from the cache or a duplicate in the batch, not judged by Lean here."""
        return self.cached_from is not None

    @property
    def timeout_rechecked(self) -> bool:
        """Lean ran it a second time here after a timeout (a copy of such a verdict ran none)."""
        return self.diagnostics.timeout_recheck is not None and not self.copied

    @property
    def first_attempt_timed_out(self) -> bool:
        """Its first attempt timed out: it is a timeout, or one re-checked after timing out."""
        recheck = self.diagnostics.timeout_recheck
        return self.stage is Stage.TIMEOUT or (
            recheck is not None and recheck.first.stage is Stage.TIMEOUT
        )

    @property
    def displayed_statement_faithful(self) -> bool | None:
        """Whether the theorem its code displays is the problem's, as the verifier read it;
        None where the verdict does not record it (a verifier before that reading, or a verdict
        judged before the gate)."""
        return self.diagnostics.displayed_statement_faithful

    @model_validator(mode="after")
    def _contract(self) -> Verification:
        if self.accepted != (self.stage is Stage.ACCEPTED):
            raise ValueError("accepted exactly when stage is 'accepted'")
        if self.accepted == bool(self.reasons):
            raise ValueError("an accepted verdict has no reasons; a rejected one has at least one")
        if (self.repl_errors is None) != (self.repl_code is None):
            raise ValueError("repl_errors and repl_code come together")
        return self


class SftRow(_Record):
    """One SFT row: the sample's key, its token ids and the loss mask."""

    input_ids: Annotated[TokenIds, Field(min_length=2)]  # prompt_ids + completion_ids
    prompt_len: Positive
    kind: Literal["first", "correction"]
    round: NonNegative
    sample_idx: NonNegative
    cap_tokens: Positive
    n_completion: Positive
    proof_sha: Sha256
    model_rev: NonEmpty
    problem_id: ProblemId

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.problem_id, self.sample_idx, self.round, self.cap_tokens)

    @model_validator(mode="after")
    def _contract(self) -> SftRow:
        if min(self.input_ids) < 0:
            raise ValueError("token ids must be non-negative")
        if self.prompt_len + self.n_completion != len(self.input_ids):
            raise ValueError("prompt_len + n_completion must equal len(input_ids)")
        if (self.kind == "first") != (self.round == 0):
            raise ValueError("kind 'first' exactly for round 0")
        return self
