"""From a completion to the code the REPL compiles, exactly as the Goedel protocol does it.

- `extract_lean_code`: the last fenced block of the first pattern that matches, after the header.
- `reinsert_statement`: Goedel's `problem_check`: the problem's own statement, then the proof
  after the displayed theorem's `:= by`. Failures raise `ReinsertionError` (Goedel returned an
  error string that was then compiled as if it were code).
- `compile_view`: ONE function for what the REPL receives and what error positions index.
- `lean_input`: the body the REPL receives for a proof (re-insertion, then the compile view) and
  where the candidate's own text starts in it: the gate's final reading is of these bytes.
- `protocol_differentials`: where the protocol's text transforms (Goedel's regex comment
  removal, its first `theorem ... := by`, the compile view's dropped lines) read a candidate
  otherwise than Lean's lexer does. Each is refused as `protocol_differential:<what>`; where
  there is none, the code Lean compiles after the trusted `:= by` is token for token the code
  the candidate displayed after its theorem's `:= by`, less plain option lines.
- `displayed_theorem`: the theorem the completion displays (and the preamble it repeats) and its
  proof's sha, from one lexing pass; `displayed_statement_faithful`: whether that theorem, and
  its preamble, are the problem's. The verifier computes it once per sample, hands it to the
  gate, and records it in the verdict, where the SFT builder reads it.
- `reinsertion_keeps_statement`: whether re-insertion and the compile view hand Lean the
  statement's own code (checked when a problem is loaded).
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from prover_assets.lean.lexer import TRIVIA, LexError, Token, TokenKind, code_tokens, tokenize
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.signature import Signature, first_theorem_signature
from prover_assets.lean.statement_identity import preamble_difference, signature_sha
from prover_assets.lean.statements import StatementError, header_end, statement_parts

__all__ = [
    "DisplayedTheorem",
    "LeanInput",
    "ReinsertionError",
    "compile_view",
    "displayed_statement_faithful",
    "displayed_theorem",
    "dropped_command_tokens",
    "extract_lean_code",
    "lean_input",
    "protocol_differentials",
    "reinsert_statement",
    "reinsertion_keeps_statement",
    "remove_comments",
]

_CODE_PATTERNS = (
    re.compile(r"```lean4\n(.*?)\n```", re.DOTALL),
    re.compile(r"```lean4\n(.*?)```", re.DOTALL),
    re.compile(r"```lean\n(.*?)```", re.DOTALL),
)
_STATEMENT_THEOREM = re.compile(r"((?:theorem).*?:=\s*by\s*sorry)", re.DOTALL)
_PROOF_THEOREM = re.compile(r"((?:^|\s)theorem\s+.*?:=\s*by)", re.DOTALL)
_BLOCK_COMMENT = re.compile(r"/-.*?-/", re.DOTALL)
_COMPILE_VIEW_DROPPED = ("import", "set_option", "open")


class ReinsertionError(ValueError):
    """The statement cannot be re-inserted; `reason` is recorded as `lean_code_error`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def extract_lean_code(completion: str) -> str | None:
    """The header plus the LAST match of the first pattern that matches; None without a block."""
    for pattern in _CODE_PATTERNS:
        matches = pattern.findall(completion)
        if matches:
            return GOEDEL_HEADER + matches[-1]
    return None


def remove_comments(text: str) -> str:
    """Goedel's comment removal: `/- ... -/` blocks (non-greedy), then `--` to line end, strip.

    Not Lean-aware on purpose: it is the protocol's own rule (a `--` inside a string is cut).
    """
    text = _BLOCK_COMMENT.sub("", text)
    return "\n".join(line.split("--", 1)[0] for line in text.split("\n")).strip()


def _theorem_match(code: str) -> tuple[str, re.Match[str]]:
    """The comment-free code (Goedel's removal) and its first `theorem ... := by`."""
    cleaned_code = remove_comments(code)
    proof_match = _PROOF_THEOREM.search(cleaned_code)
    if proof_match is None:
        raise ReinsertionError("code_has_no_theorem")
    return cleaned_code, proof_match


def _reinsertion_parts(statement: str, code: str) -> tuple[str, str]:
    """Goedel's `problem_check` in two parts: the trusted statement up to its `:= by` (sorry
    removed), and the candidate's text after its first `theorem ... := by` (comments removed)."""
    if "apply?" in code or "exact?" in code:
        raise ReinsertionError("apply?_or_exact?")
    cleaned_statement = remove_comments(statement)
    statement_match = _STATEMENT_THEOREM.search(cleaned_statement)
    if statement_match is None:
        raise ReinsertionError("statement_has_no_theorem_sorry")
    head = cleaned_statement[: statement_match.end()].replace("sorry", "")
    cleaned_code, proof_match = _theorem_match(code)
    return head, cleaned_code[proof_match.end() :]


def reinsert_statement(statement: str, code: str) -> str:
    """The problem's statement with the proof that follows the displayed theorem's `:= by`."""
    head, tail = _reinsertion_parts(statement, code)
    return head + tail


def _dropped(line: str) -> bool:
    return line.strip().startswith(_COMPILE_VIEW_DROPPED)


def compile_view(code: str) -> str:
    """The text the REPL compiles against the header env: lines whose stripped text starts with
    `import`, `set_option` or `open` are dropped (including indented `set_option ... in`)."""
    return "\n".join(line for line in code.split("\n") if not _dropped(line))


@dataclass(frozen=True)
class LeanInput:
    """What the REPL receives for one proof against the header's env: `body` (the compile view
    of the re-inserted text), of which `body[:proof_start]` is the trusted statement's and the
    rest the candidate's text after its theorem's `:= by`, as Lean gets it."""

    body: str
    proof_start: int

    @property
    def proof(self) -> str:
        return self.body[self.proof_start :]


def lean_input(statement: str, code: str) -> LeanInput:
    """The bytes Lean compiles for `code` judged against `statement`; raises ReinsertionError.

    The trusted part's last line (`... := by`) is joined by the proof's first line, so the
    compile view keeps or drops the two together: a statement whose last line it would drop
    cannot carry a proof (`statement_line_dropped`)."""
    head, tail = _reinsertion_parts(statement, code)
    if _dropped(head.split("\n")[-1]):
        raise ReinsertionError("statement_line_dropped")
    return LeanInput(compile_view(head + tail), len(compile_view(head)))


def protocol_differentials(code: str) -> list[str]:
    """`protocol_differential:<what>` for each way the protocol's transforms read `code`
    otherwise than Lean's lexer. None for code that does not lex (the gate refuses it as
    `lex_error`) or that has no theorem for re-insertion (re-insertion refuses it)."""
    try:
        tokens = tokenize(code)
        cleaned, found = _theorem_match(code)
    except (LexError, ReinsertionError):
        return []
    tail = cleaned[found.end() :]
    found_what = [_comment_differential(code, t) or _literal_differential(code, t) for t in tokens]
    try:
        theorem = _theorem_differential(cleaned, code_tokens(cleaned), found)
        # The proof's readings compare only where both start at the same `:= by`.
        tail_tokens = code_tokens(tail) if theorem is None else []
    except LexError:
        found_what.append("comment_removal")  # the regex's removal leaves text Lean cannot lex
    else:
        found_what.append(theorem)
        if theorem is None:
            found_what.append(_comment_removal_differential(tokens, tail_tokens))
            found_what.append(_dropped_line_differential(tail, tail_tokens))
    reasons: list[str] = []
    for what in found_what:
        if what is not None and f"protocol_differential:{what}" not in reasons:
            reasons.append(f"protocol_differential:{what}")
    return reasons


def _regex_opens(code: str, token: Token) -> bool:
    """Whether Goedel's block regex (`/-.*?-/`) can start a removal at a `/-` inside `token`:
    only where some `-/` follows it in the text; a `/-` with no `-/` after it anywhere is left
    alone by the regex, as Lean leaves it (`-- (-20)/-10`)."""
    opener = token.text.find("/-")
    return opener >= 0 and code.find("-/", token.start + opener + 2) >= 0


def _literal_differential(code: str, token: Token) -> str | None:
    """A comment marker inside a string or a «» name, which Goedel's comment removal cuts: `--`
    always (it cuts the line), `/-` where a `-/` follows it. (A char literal holds one
    character, and `-` is no identifier character: neither can hold `--` or `/-`.)"""
    if token.kind is TokenKind.STRING:
        what = "raw_string" if token.text.startswith("r") else "string"
    elif token.kind is TokenKind.IDENT:
        what = "quoted_name"
    else:
        return None
    marked = "--" in token.text or _regex_opens(code, token)
    return f"comment_marker_in_{what}" if marked else None


def _comment_differential(code: str, token: Token) -> str | None:
    """A comment opener inside a comment: Lean nests `/-`; the regex closes at the first `-/`
    and removes `/- ... -/` across lines before it cuts `--` comments. A `/-` in a line comment
    counts only where a `-/` follows it: else the regex removes nothing and Lean skips the line."""
    if token.kind is TokenKind.BLOCK_COMMENT and "/-" in token.text[2:]:
        return "nested_comment"
    if token.kind is TokenKind.LINE_COMMENT and _regex_opens(code, token):
        return "comment_opener_in_line_comment"
    return None


def _theorem_differential(cleaned: str, tokens: list[Token], found: re.Match[str]) -> str | None:
    """Whether the `theorem ... := by` re-insertion takes (`found`, the regex's first in the
    comment-free text) is the first theorem Lean reads there, ended by its signature's own
    `:= by` (a token ending where the regex's `by` ends, right after the `:=`, is `by`)."""
    signature = first_theorem_signature(tokens)
    if signature is None or signature.theorem_start != cleaned.index("theorem", found.start()):
        return "theorem"
    assign = next(i for i, t in enumerate(tokens) if t.start == signature.assign_start)
    following = tokens[assign + 1] if assign + 1 < len(tokens) else None
    return None if following is not None and following.end == found.end() else "theorem"


def _texts(tokens: list[Token]) -> list[tuple[TokenKind, str]]:
    return [(t.kind, t.text) for t in tokens]


def _comment_removal_differential(tokens: list[Token], tail_tokens: list[Token]) -> str | None:
    """Whether the proof after comment removal has the code tokens Lean reads after the
    displayed theorem's `:= by` (a comment the regex and Lean end at different places)."""
    code = [t for t in tokens if t.kind not in TRIVIA]
    signature = first_theorem_signature(code)
    if signature is None:
        return None  # the theorem differential says it
    after = [t for t in code if t.start > signature.assign_start][1:]  # past `by`
    return None if _texts(after) == _texts(tail_tokens) else "comment_removal"


def _dropped_line_differential(tail: str, tail_tokens: list[Token]) -> str | None:
    """Whether the compile view drops, from the proof, a line that is not one whole plain
    `set_option`/`open`/`import` command (a string crossing the line, a tactic after the option,
    a proof line that merely starts with `open...`). Only a string crosses a line in a
    comment-free text, and no plain command holds one."""
    offset = 0
    for number, line in enumerate(tail.split("\n")):
        start, end = offset, offset + len(line)
        offset = end + 1
        if number == 0 or not _dropped(line):
            continue  # the first line is joined to the trusted statement's last line
        if not _plain_command([t for t in tail_tokens if t.end > start and t.start < end]):
            return "dropped_line"
    return None


def _plain_command(tokens: Sequence[Token]) -> bool:
    """`set_option <name> <value>`, `open <names>` or `import <name>`, each optionally `in`
    (`tokens`: those of a line that starts with one of the three words, so never none)."""
    if tokens[-1].text == "in":
        tokens = tokens[:-1]
    if len(tokens) < 2 or any(t.kind is not TokenKind.IDENT for t in tokens[:2]):
        return False
    keyword = tokens[0].text
    if keyword == "set_option":
        return len(tokens) == 3 and tokens[2].kind in (TokenKind.NUMBER, TokenKind.IDENT)
    if keyword == "import":
        return len(tokens) == 2
    # `open A B C`; a line that merely starts with the word (`open_lemma a b`) is no command.
    return keyword == "open" and all(t.kind is TokenKind.IDENT for t in tokens)


def dropped_command_tokens(code: str, tokens: Sequence[Token]) -> frozenset[int]:
    """The indices of `tokens` (the code tokens of `code`) that stand on a line the compile view
    drops as one whole plain `set_option`/`open`/`import` command: Lean never reads them."""
    starts = [t.start for t in tokens]
    ends = [t.end for t in tokens]
    indices: set[int] = set()
    offset = 0
    for line in code.split("\n"):
        start, end = offset, offset + len(line)
        offset = end + 1
        if not _dropped(line):
            continue
        # The tokens overlapping the line (they are in text order): ending after its start,
        # starting before its end.
        on_line = range(bisect.bisect_right(ends, start), bisect.bisect_left(starts, end))
        if on_line and _plain_command([tokens[i] for i in on_line]):
            indices.update(on_line)
    return frozenset(indices)


@dataclass(frozen=True)
class DisplayedTheorem:
    """What a completion's code displays: its first theorem's signature (None when it has none
    or does not lex), the tokens between its header and that theorem (where a preamble problem's
    trusted declarations must stand), and the sha256 of its proof's tokens (everything after the
    theorem's `:=`), so that comments and layout do not make two proofs distinct."""

    signature: Signature | None
    proof_sha: str
    before_theorem: tuple[Token, ...] = ()

    def signature_matches(self, statement: str) -> bool:
        """Whether the displayed theorem has the signature tokens of the trusted `statement`'s
        theorem (the theorem's name ignored)."""
        try:
            _, trusted = statement_parts(statement)
        except StatementError:
            return False
        return self._same_signature(trusted)

    def faithful_to(self, statement: str) -> bool:
        """Whether the displayed theorem is the trusted `statement`'s: its preamble repeated
        token for token before the theorem, then the same signature."""
        try:
            preamble, trusted = statement_parts(statement)
        except StatementError:
            return False
        return (
            self._same_signature(trusted)
            and preamble_difference(preamble, self.before_theorem) is None
        )

    def _same_signature(self, trusted: Signature) -> bool:
        return self.signature is not None and signature_sha(self.signature) == signature_sha(
            trusted
        )


def displayed_theorem(code: str) -> DisplayedTheorem:
    """The displayed theorem of `code`, from one lexing pass."""
    # The protocol's fixed header carries no theorem: skip lexing it (a third of the text).
    body = code.removeprefix(GOEDEL_HEADER)
    try:
        tokens = code_tokens(body)
    except LexError:
        return DisplayedTheorem(None, hashlib.sha256(code.encode("utf-8")).hexdigest())
    signature = first_theorem_signature(tokens)
    proof = [t.text for t in tokens if signature is None or t.start >= signature.assign_start]
    body_start = header_end(tokens)[0]
    before = [
        t for t in tokens[body_start:] if signature is None or t.start < signature.theorem_start
    ]
    return DisplayedTheorem(
        signature,
        hashlib.sha256("\x1f".join(proof).encode("utf-8")).hexdigest(),
        tuple(before),
    )


def displayed_statement_faithful(code: str, statement: str) -> bool:
    """Whether the first theorem displayed in `code` has the signature tokens of `statement`'s
    theorem, after its preamble (if it has one) repeated token for token. A proof of a different displayed theorem is judged by Goedel's protocol on the
    re-inserted original, so it is accepted but must not become training data."""
    return displayed_theorem(code).faithful_to(statement)


def reinsertion_keeps_statement(statement: str) -> bool:
    """Whether re-insertion and the compile view hand Lean the statement's own code.

    The statement re-inserted with itself as the proof, in the compile view, must have the code
    tokens of the statement after its header. Goedel's comment removal is not Lean-aware (a
    `--` inside a string cuts the line) and the compile view drops every line that starts with
    `open` or `set_option`, so a preamble could otherwise reach Lean other than it was trusted.
    """
    try:
        rebuilt = code_tokens(compile_view(reinsert_statement(statement, statement)))
        tokens = code_tokens(statement)
    except (ReinsertionError, LexError):
        return False
    trusted = tokens[header_end(tokens)[0] :]
    return [(t.kind, t.text) for t in rebuilt] == [(t.kind, t.text) for t in trusted]
