"""Problem statements: Goedel's normalisation made safe, shape checks, and identity hashes.

A statement is header lines (`import`, `set_option`, `open`), then an optional *preamble* of
declarations the theorem is stated in (MOBench's `noncomputable abbrev solution : ℝ := ...`, a
`structure` and its `def`s, `variable`s, a `namespace`), then exactly one `theorem` whose proof
is `:= by sorry`. The preamble is trusted text: the gate holds a candidate to it token for
token, and Lean compiles the trusted copy.

`statement_sha` identifies a statement by its preamble and signature tokens (comments,
whitespace and the theorem name ignored; without a preamble, the signature's alone, as
before preambles were supported); `alpha_sha` additionally renames the signature's bound
variables and hypothesis names in order of appearance. Known limits, by design of a lexical
hash: `ℝ` vs `Real`, reordered hypotheses, and an added hypothesis all change both hashes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from prover_assets.lean.lexer import (
    LexError,
    Token,
    TokenKind,
    code_tokens,
    is_plain_identifier,
    name_components,
)
from prover_assets.lean.signature import (
    Signature,
    claim_colon,
    signature_from,
)
from prover_assets.lean.statement_identity import (
    identity_sha,
)
from prover_assets.lean.words import PREAMBLE_DECLARATIONS, banned_word

__all__ = [
    "BY_MARKER",
    "ParsedStatement",
    "StatementError",
    "alpha_sha",
    "count_by_markers",
    "header_end",
    "normalise_statement",
    "parse_statement",
    "statement_check_command",
    "statement_parts",
    "statement_sha",
]

# `:= by` as Goedel's rule splits on it, also in the line-broken form `:=\n  by`.
BY_MARKER = re.compile(r":=\s*by(?=\s|$)")
_GOEDEL_SPLIT = ":= by"

HEADER_KEYWORDS = frozenset({"import", "set_option", "open"})

# Tokens that start a command other than the problem's one theorem. Any of them in a statement
# makes it unsupported, with the keyword as the reason.
COMMAND_KEYWORDS = frozenset(
    {
        "theorem",
        "lemma",
        "def",
        "abbrev",
        "structure",
        "inductive",
        "variable",
        "instance",
        "notation",
        "class",
        "namespace",
        "section",
        "noncomputable",
        "universe",
        "attribute",
        "macro",
        "macro_rules",
        "syntax",
        "elab",
        "elab_rules",
        "example",
        "axiom",
        "opaque",
        "local",
        "scoped",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "private",
        "protected",
        "mutual",
        "deriving",
        "import",
        "set_option",
        "open",
        "end",
        "unsafe",
        "partial",
        "prelude",
        "initialize",
        "builtin_initialize",
        "declare_syntax_cat",
        "include",
        "omit",
        "export",
    }
)

# The commands a preamble may consist of (each may carry `@[...]` attributes and doc comments).
# Not among them: `open`, `set_option` and `import` (Goedel's compile view drops every line that
# starts with one, so Lean would not see it), `example`, a second `theorem`, and anything that
# reaches the elaborator (`macro`, `syntax`, `elab`, `axiom`, ...): a statement whose preamble
# has one is unsupported, with `preamble:<keyword>` as the reason.
PREAMBLE_COMMANDS = frozenset(
    {
        "def",
        "abbrev",
        "lemma",
        "structure",
        "inductive",
        "class",
        "variable",
        "universe",
        "attribute",
        "noncomputable",
        "namespace",
        "section",
        "end",
        "local",
        "scoped",
        "private",
        "protected",
        "deriving",
        "mutual",
        *PREAMBLE_DECLARATIONS,
    }
)
# Words that only modify the declaration command that follows them.
_MODIFIERS = frozenset({"noncomputable", "private", "protected"})


class StatementError(ValueError):
    """A statement Goedel's rule would silently cut or cannot handle."""


def count_by_markers(text: str) -> int:
    """How many `:= by` markers `text` holds (a statement has exactly one)."""
    return len(BY_MARKER.findall(text))


def normalise_statement(lean4_code: str) -> str:
    """Goedel's prompt statement: the text before the theorem's `:= by`, plus `:= by sorry`.

    Byte-identical to `lean4_code.split(":= by")[0] + ":= by sorry"` wherever that rule is safe,
    i.e. wherever the theorem's `:= by` is the first. A `:= by` in a preamble before the theorem
    (`instance ... := by infer_instance`) is left as it is: only the theorem's own is cut.
    Raises `StatementError` where the theorem holds `:= by` more than once (Goedel would cut the
    statement) or not at all; the line-broken form `:=\\n  by sorry` is accepted.
    """
    start = _theorem_offset(lean4_code)
    markers = list(BY_MARKER.finditer(lean4_code, start))
    literal_count = lean4_code.count(_GOEDEL_SPLIT, start)
    if len(markers) != 1 or literal_count > 1:
        raise StatementError(
            f"expected exactly one ':= by' in the theorem, found {max(len(markers), literal_count)}"
        )
    return lean4_code[: markers[0].start()] + ":= by sorry"


def _theorem_offset(text: str) -> int:
    """Where the first `theorem` command starts (0 when there is none or the text does not lex:
    then every `:= by` counts, as in Goedel's rule)."""
    try:
        tokens = code_tokens(text)
    except LexError:
        return 0
    index = _theorem_index(tokens, header_end(tokens)[0])
    return 0 if index is None else tokens[index].start


def _theorem_index(tokens: Sequence[Token], start: int) -> int | None:
    for index in range(start, len(tokens)):
        if tokens[index].kind is TokenKind.IDENT and tokens[index].text == "theorem":
            return index
    return None


@dataclass(frozen=True)
class ParsedStatement:
    """A formal statement split into its header, its preamble and its one theorem (name,
    signature, proof)."""

    supported: bool
    reason: str | None
    theorem_name: str | None
    header: str
    header_commands: tuple[str, ...] = field(default=())
    signature: Signature | None = None
    preamble: str = ""  # the declarations between header and theorem, as the source has them
    preamble_tokens: tuple[Token, ...] = field(default=())
    namespace: str = ""  # the namespace the preamble leaves open at the theorem

    @property
    def qualified_name(self) -> str | None:
        """The theorem's full name: inside the preamble's namespace, if it opens one."""
        if self.theorem_name is None or not self.namespace:
            return self.theorem_name
        return f"{self.namespace}.{self.theorem_name}"

    @property
    def statement_sha(self) -> str:
        """The statement's identity: preamble and signature tokens (see `statement_sha`)."""
        return identity_sha(self.preamble_tokens, _require(self.signature), alpha=False)

    @property
    def alpha_sha(self) -> str:
        """The statement's identity up to renaming the signature's bound names."""
        return identity_sha(self.preamble_tokens, _require(self.signature), alpha=True)


def _require(signature: Signature | None) -> Signature:
    if signature is None:
        raise StatementError("no `theorem <name> ... :=` found in the statement")
    return signature


def statement_check_command(statement: str) -> str | None:
    """A command that elaborates only if the trusted statement follows from the theorem Lean
    proved: `example <trusted signature> := by apply _root_.<namespace>.<name> <;> assumption`.

    Sent in the proof's env, where the header's `open`s and the preamble's scope (namespace,
    `variable`s) hold, so the trusted signature is elaborated afresh there, as the theorem's own
    header was, and a candidate that changed what the statement means (a shadowing definition,
    another namespace, a theorem of another statement under the name) fails it. Its proof uses
    the theorem and the example's own context alone (no `sorry`, no axiom), so when it
    elaborates the statement is proved from the theorem; the theorem's axioms are checked apart.

    Derivation, not equality of types, because under the pinned Lean 4.9 the theorem's type is
    not fixed by its text alone:
    - section variables: before Lean 4.10 a theorem includes the `variable`s its proof uses, so
      a proof of MOBench's imo_sl_2009_N3 that uses the preamble's hypothesis `h` (every honest
      one) has the type `∀ {f} (h : ...) (h0 : ...) (K : ℕ), ...`, which no `axiom` of the
      signature has (an axiom includes only the variables its type mentions). The example sees
      the same variables, and `assumption` supplies them; a hypothesis the statement does not
      give (a binder or a variable it lacks) is in no context, and the check fails;
    - auto-bound implicits (on by default outside Mathlib): a name the signature leaves unbound
      is bound by the example's header as by the theorem's, and unification matches the two.
    None when the statement has no signature with a type.
    """
    parsed = parse_statement(statement)
    signature = parsed.signature
    if signature is None or _type_reason(signature.tokens) is not None:
        return None
    text = statement[signature.tokens[0].start : signature.tokens[-1].end]
    return f"example {text} := by\n  apply _root_.{parsed.qualified_name} <;> assumption"


def _type_reason(tokens: Sequence[Token]) -> str | None:
    """Why a signature states nothing: `no_type` for binders alone (no `:` outside every
    bracket), `empty_type` for a `:` with nothing after it (`theorem t : := by`); else None."""
    colon = claim_colon(tokens)
    if colon is None:
        return "no_type"
    return None if colon + 1 < len(tokens) else "empty_type"


def header_end(tokens: Sequence[Token]) -> tuple[int, list[tuple[int, int]], str | None]:
    """Index of the first token after the header, the (start, end) token spans of its commands,
    and a reason if the header itself is unsupported."""
    i = 0
    spans: list[tuple[int, int]] = []
    while i < len(tokens) and tokens[i].text in HEADER_KEYWORDS:
        start = i
        keyword = tokens[i].text
        i += 1
        if keyword in ("import", "set_option"):
            arity = 1 if keyword == "import" else 2
            i += arity
        else:
            if i < len(tokens) and tokens[i].text == "scoped":
                i += 1
            while i < len(tokens) and (
                tokens[i].kind is TokenKind.IDENT and tokens[i].text not in COMMAND_KEYWORDS
            ):
                if tokens[i].text == "in":
                    return i, spans, "open_in"
                i += 1
        if i > len(tokens):
            return len(tokens), spans, f"incomplete_{keyword}"
        spans.append((start, i))
    return i, spans, None


def _preamble_reason(tokens: Sequence[Token], start: int, end: int) -> tuple[str | None, str]:
    """Why the preamble `tokens[start:end]` is not supported (None if it is), and the namespace
    it leaves open at its end ("" when it is not supported)."""
    scopes: list[tuple[str, bool]] = []  # (name, whether a namespace: a section adds none)
    for index in range(start, end):
        token = tokens[index]
        if token.kind is TokenKind.HASH_COMMAND:
            return f"command:{token.text}", ""
        text = token.text
        if _preamble_refuses(token):
            return f"preamble:{text}", ""
        if index == start and text != "@[" and text not in PREAMBLE_COMMANDS:
            return f"unexpected_token:{text}", ""
        if token.kind is not TokenKind.IDENT:
            continue
        following = tokens[index + 1].text if index + 1 < len(tokens) else ""
        if text in _MODIFIERS and following not in PREAMBLE_COMMANDS:
            return text, ""
        named = _scope_name(tokens, index, end)
        if text == "namespace" and named is None:
            return "preamble:namespace", ""
        if text in ("namespace", "section"):
            scopes.append((named or "", text == "namespace"))
        elif text == "end":
            if not scopes or scopes[-1][0] != (named or ""):
                return "preamble:end", ""
            scopes.pop()
    return None, ".".join(name for name, is_namespace in scopes if is_namespace)


def _preamble_refuses(token: Token) -> bool:
    """A word no preamble may hold: a command outside `PREAMBLE_COMMANDS`, or a banned word
    other than the declarations a preamble may make."""
    text = token.text
    if token.kind is not TokenKind.IDENT or text in PREAMBLE_DECLARATIONS:
        return False
    return (text in COMMAND_KEYWORDS and text not in PREAMBLE_COMMANDS) or banned_word(text)


def _scope_name(tokens: Sequence[Token], index: int, end: int) -> str | None:
    """The name after `namespace`/`section`/`end` at `index`, if one follows (the next command
    starts with a keyword, so an identifier that is none is the name)."""
    if index + 1 >= end:
        return None
    following = tokens[index + 1]
    if following.kind is not TokenKind.IDENT or following.text in COMMAND_KEYWORDS:
        return None
    return following.text


def parse_statement(text: str) -> ParsedStatement:
    """Header lines, an optional preamble, then exactly one `theorem`; anything else is
    unsupported, with the reason."""
    try:
        tokens = code_tokens(text)
    except LexError as exc:
        return ParsedStatement(False, f"lex_error:{exc}", None, "")
    body_start, spans, reason = header_end(tokens)
    header = text[tokens[spans[0][0]].start : tokens[spans[-1][1] - 1].end] if spans else ""
    header_commands = tuple(text[tokens[s].start : tokens[e - 1].end] for s, e in spans)
    theorem_index = _theorem_index(tokens, body_start)
    preamble_end = len(tokens) if theorem_index is None else theorem_index
    namespace = ""
    if reason is None:
        reason, namespace = _preamble_reason(tokens, body_start, preamble_end)
    if reason is None and theorem_index is None:
        reason = "no_theorem"
    if reason is None:
        reason = _theorem_reason(tokens, preamble_end)
    signature = None
    if reason is None:
        signature = signature_from(tokens, preamble_end)
        if signature is None:
            reason = "no_signature"
        elif (missing := _type_reason(signature.tokens)) is not None:
            reason = missing
        elif not all(map(is_plain_identifier, name_components(signature.name))):
            reason = "theorem_name"  # printed in «» by `#print axioms`: not worth supporting
    if reason is None and (markers := count_by_markers(text[tokens[preamble_end].start :])) != 1:
        reason = f"by_count:{markers}"
    preamble_tokens = tuple(tokens[body_start:preamble_end]) if theorem_index is not None else ()
    preamble = ""
    if preamble_tokens:
        after_header = tokens[body_start - 1].end if body_start else 0
        preamble = text[after_header : tokens[preamble_end].start]
    return ParsedStatement(
        supported=reason is None,
        reason=reason,
        theorem_name=".".join(name_components(signature.name)) if signature else None,
        header=header,
        header_commands=header_commands,
        signature=signature,
        preamble=preamble.strip(),
        preamble_tokens=preamble_tokens,
        namespace=namespace,
    )


def _theorem_reason(tokens: Sequence[Token], theorem_index: int) -> str | None:
    """Why the theorem's own tokens (signature and proof) are not one bare theorem."""
    for index in range(theorem_index + 1, len(tokens)):
        token = tokens[index]
        if token.kind is TokenKind.HASH_COMMAND:
            return f"command:{token.text}"
        if token.text == "@[":
            return "attribute"
        if token.kind is TokenKind.IDENT and token.text in COMMAND_KEYWORDS:
            if token.text == "theorem":
                return "multiple_theorems"
            if token.text == "noncomputable" and index + 1 < len(tokens):
                follower = tokens[index + 1].text
                return follower if follower in COMMAND_KEYWORDS else "noncomputable"
            return token.text
    return None


def statement_parts(text: str) -> tuple[tuple[Token, ...], Signature]:
    """The preamble tokens and the signature of `text`'s first theorem (raises without one)."""
    try:
        tokens = code_tokens(text)
    except LexError as exc:
        raise StatementError(f"the statement does not lex: {exc}") from exc
    body_start = header_end(tokens)[0]
    index = _theorem_index(tokens, body_start)
    signature = None if index is None else signature_from(tokens, index)
    return tuple(tokens[body_start:index]), _require(signature)


def statement_sha(text: str) -> str:
    """sha256 of the statement's preamble and signature tokens (the theorem's name, comments and
    whitespace excluded)."""
    return identity_sha(*statement_parts(text), alpha=False)


def alpha_sha(text: str) -> str:
    """`statement_sha` after renaming the signature's binders and hypotheses consistently, in
    order of appearance."""
    return identity_sha(*statement_parts(text), alpha=True)
