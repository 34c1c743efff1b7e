"""Problem statements: Goedel's normalisation made safe, shape checks, and identity hashes.

`statement_sha` identifies a statement by its signature tokens (comments, whitespace and the
theorem name ignored); `alpha_sha` additionally renames bound variables and hypothesis names in
order of appearance. Known limits, by design of a lexical hash: `ℝ` vs `Real`, reordered
hypotheses, and an added hypothesis all change both hashes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from prover_assets.lean.lexer import LexError, Token, TokenKind, code_tokens

__all__ = [
    "BY_MARKER",
    "ParsedStatement",
    "Signature",
    "StatementError",
    "alpha_sha",
    "count_by_markers",
    "first_theorem_signature",
    "header_end",
    "normalise_statement",
    "parse_statement",
    "signature_alpha_sha",
    "signature_sha",
    "statement_check_command",
    "statement_sha",
    "theorem_signature",
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
        "initialize",
        "builtin_initialize",
        "declare_syntax_cat",
        "include",
        "omit",
        "export",
    }
)

_OPENING = {"(": ")", "{": "}", "[": "]", "⦃": "⦄", "⟨": "⟩"}
_CLOSING = frozenset(_OPENING.values())
_BINDER_KEYWORDS = frozenset({"∀", "∃", "λ", "fun", "∑", "∏", "⋃", "⋂", "⨆", "⨅", "Π", "Σ", "∫"})


class StatementError(ValueError):
    """A statement Goedel's rule would silently cut or cannot handle."""


def count_by_markers(text: str) -> int:
    """How many `:= by` markers `text` holds (a statement has exactly one)."""
    return len(BY_MARKER.findall(text))


def normalise_statement(lean4_code: str) -> str:
    """Goedel's prompt statement: the text before `:= by`, plus `:= by sorry`.

    Byte-identical to `lean4_code.split(":= by")[0] + ":= by sorry"` wherever that rule is safe.
    Raises `StatementError` where `:= by` occurs more than once (Goedel would cut the statement)
    or not at all; the line-broken form `:=\\n  by sorry` is accepted.
    """
    markers = list(BY_MARKER.finditer(lean4_code))
    literal_count = lean4_code.count(_GOEDEL_SPLIT)
    if len(markers) != 1 or literal_count > 1:
        raise StatementError(
            f"expected exactly one ':= by' in the statement, found {max(len(markers), literal_count)}"
        )
    return lean4_code[: markers[0].start()] + ":= by sorry"


@dataclass(frozen=True)
class Signature:
    """The displayed theorem: its name and the tokens between the name and its `:=`."""

    name: str
    tokens: tuple[Token, ...]
    theorem_start: int  # offset of the `theorem` keyword
    assign_start: int  # offset of the `:=` that ends the signature


@dataclass(frozen=True)
class ParsedStatement:
    """A formal statement split into its header and its one theorem (name, signature, proof)."""

    supported: bool
    reason: str | None
    theorem_name: str | None
    header: str
    header_commands: tuple[str, ...] = field(default=())
    signature: Signature | None = None


def _signature_from(tokens: Sequence[Token], theorem_index: int) -> Signature | None:
    if theorem_index + 1 >= len(tokens) or tokens[theorem_index + 1].kind is not TokenKind.IDENT:
        return None
    depth = 0
    for j in range(theorem_index + 2, len(tokens)):
        text = tokens[j].text
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
        elif text == ":=" and depth == 0:
            return Signature(
                name=tokens[theorem_index + 1].text,
                tokens=tuple(tokens[theorem_index + 2 : j]),
                theorem_start=tokens[theorem_index].start,
                assign_start=tokens[j].start,
            )
    return None


def statement_check_command(statement: str) -> str | None:
    """A command that elaborates only if the root constant `<name>` proves the trusted statement.

    `example : ∀ <binders>, <type> := @_root_.<name>`, sent in the proof's env (where the header's
    `open`s hold): the trusted signature is elaborated afresh there, so a candidate that changed
    what the statement means (a shadowing definition, a section variable, another namespace)
    fails it. None when the statement has no theorem signature.
    """
    try:
        tokens = code_tokens(statement)
    except LexError:
        return None
    signature = first_theorem_signature(tokens)
    if signature is None or not signature.tokens:
        return None
    depth, colon = 0, None
    for index, token in enumerate(signature.tokens):
        if token.text in _OPENING:
            depth += 1
        elif token.text in _CLOSING:
            depth -= 1
        elif token.text == ":" and depth == 0:
            colon = index
            break
    if colon is None:
        return None
    text = lambda part: statement[part[0].start : part[-1].end] if part else ""  # noqa: E731
    binders, claim = text(signature.tokens[:colon]), text(signature.tokens[colon + 1 :])
    quantified = f"∀ {binders}, {claim}" if binders else claim
    return f"example : {quantified} := @_root_.{signature.name}"


def theorem_signature(text: str) -> Signature | None:
    """The signature of the first `theorem` in `text` (code or statement); None if there is none."""
    try:
        tokens = code_tokens(text)
    except LexError:
        return None
    return first_theorem_signature(tokens)


def first_theorem_signature(tokens: Sequence[Token]) -> Signature | None:
    """The signature of the first `theorem` among `tokens`, or None when there is none."""
    for index, token in enumerate(tokens):
        if token.kind is TokenKind.IDENT and token.text == "theorem":
            return _signature_from(tokens, index)
    return None


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


def parse_statement(text: str) -> ParsedStatement:
    """Header lines, then exactly one `theorem`; anything else is unsupported, with the reason."""
    try:
        tokens = code_tokens(text)
    except LexError as exc:
        return ParsedStatement(False, f"lex_error:{exc}", None, "")
    body_start, spans, header_reason = header_end(tokens)
    header = text[tokens[spans[0][0]].start : tokens[spans[-1][1] - 1].end] if spans else ""
    header_commands = tuple(text[tokens[s].start : tokens[e - 1].end] for s, e in spans)
    theorem_index: int | None = None
    reason = header_reason
    for index in range(body_start, len(tokens)):
        if reason is not None:
            break
        token = tokens[index]
        if token.kind is TokenKind.HASH_COMMAND:
            reason = f"command:{token.text}"
        elif token.text == "@[":
            reason = "attribute"
        elif token.kind is TokenKind.IDENT and token.text in COMMAND_KEYWORDS:
            if token.text == "theorem" and theorem_index is None:
                theorem_index = index
            elif token.text == "theorem":
                reason = "multiple_theorems"
            elif token.text == "noncomputable" and index + 1 < len(tokens):
                follower = tokens[index + 1].text
                reason = follower if follower in COMMAND_KEYWORDS else "noncomputable"
            else:
                reason = token.text
        elif theorem_index is None:
            reason = f"unexpected_token:{token.text}"
    signature = None
    theorem_name = None
    if reason is None:
        if theorem_index is None:
            reason = "no_theorem"
        else:
            signature = _signature_from(tokens, theorem_index)
            if signature is None:
                reason = "no_signature"
            else:
                theorem_name = signature.name
    if reason is None and (markers := count_by_markers(text)) != 1:
        reason = f"by_count:{markers}"
    return ParsedStatement(
        supported=reason is None,
        reason=reason,
        theorem_name=theorem_name,
        header=header,
        header_commands=header_commands,
        signature=signature,
    )


def _hash_tokens(texts: Sequence[str]) -> str:
    return hashlib.sha256("\x1f".join(texts).encode("utf-8")).hexdigest()


_KIND_PREFIX = {kind: f"{kind.value}:" for kind in TokenKind}


def _token_key(token: Token) -> str:
    return _KIND_PREFIX[token.kind] + token.text


def _require_signature(text: str) -> Signature:
    signature = theorem_signature(text)
    if signature is None:
        raise StatementError("no `theorem <name> ... :=` found in the statement")
    return signature


def statement_sha(text: str) -> str:
    """sha256 of the theorem's signature tokens (name, comments and whitespace excluded)."""
    return signature_sha(_require_signature(text))


def signature_sha(signature: Signature) -> str:
    """The sha256 of a theorem's signature, comments and whitespace aside: the statement's
    identity."""
    return _hash_tokens([_token_key(t) for t in signature.tokens])


def _is_simple_ident(token: Token) -> bool:
    return token.kind is TokenKind.IDENT and "." not in token.text and token.text != "_"


def _group_names(tokens: Sequence[Token], start: int) -> tuple[list[int], int]:
    """Indices of the names bound by the bracket group opening at `start` (`(a b : T)`,
    `⟨x, hx⟩`), and the index after its closing bracket. Names stop at the group's own `:`."""
    closing = _OPENING[tokens[start].text]
    names: list[int] = []
    depth = 0
    collecting = True
    for j in range(start, len(tokens)):
        text = tokens[j].text
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
            if depth == 0:
                return names, j + 1
        elif depth == 1 and text == ":" and closing != "⟩":
            collecting = False
        elif depth >= 1 and collecting and _is_simple_ident(tokens[j]):
            names.append(j)
    return names, len(tokens)


def _quantified_names(tokens: Sequence[Token], keyword_index: int) -> list[int]:
    """Names after a binder keyword: `∀ x y : T,`, `∃! n > 0,`, `∑ i in s,`, `fun ⟨a, b⟩ =>`."""
    names: list[int] = []
    j = keyword_index + 1
    if j < len(tokens) and tokens[j].text == "!":
        j += 1
    while j < len(tokens):
        token = tokens[j]
        if _is_simple_ident(token) and token.text != "in":
            names.append(j)
            j += 1
        elif token.text == "_":
            j += 1
        elif token.text in _OPENING:
            group, j = _group_names(tokens, j)
            names.extend(group)
        else:
            break
    return names


def _set_builder_names(tokens: Sequence[Token], brace_index: int) -> list[int]:
    """`{x | p x}`, `{x : T | p x}`, `{(a, b) | ...}`: the names before the `|`."""
    names: list[int] = []
    depth = 0
    typed = False
    for j in range(brace_index, len(tokens)):
        text = tokens[j].text
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
            if depth == 0:
                return []
        elif depth == 1 and text == "|":
            return names
        elif depth == 1 and text == ":":
            typed = True
        elif not typed and _is_simple_ident(tokens[j]):
            names.append(j)
        elif not typed and text != ",":
            return []
    return []


def _binder_names(tokens: Sequence[Token]) -> list[str]:
    """Bound variable and hypothesis names, in order of their first binding occurrence."""
    bound: set[int] = set()
    depth = 0
    before_type = True
    for i, token in enumerate(tokens):
        text = token.text
        if before_type and depth == 0 and text in _OPENING and text != "⟨":
            bound.update(_group_names(tokens, i)[0])
        if text == ":" and depth == 0:
            before_type = False
        if text in _BINDER_KEYWORDS:
            bound.update(_quantified_names(tokens, i))
        elif text == "{":
            bound.update(_set_builder_names(tokens, i))
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
    order: list[str] = []
    for index in sorted(bound):
        if tokens[index].text not in order:
            order.append(tokens[index].text)
    return order


def alpha_sha(text: str) -> str:
    """`statement_sha` after renaming binders and hypotheses consistently, in order of appearance."""
    return signature_alpha_sha(_require_signature(text))


def signature_alpha_sha(signature: Signature) -> str:
    """As `signature_sha`, with bound names renamed in order: a statement's identity up to
    renaming."""
    tokens = signature.tokens
    renaming = {name: f"\x00{index}" for index, name in enumerate(_binder_names(tokens))}
    keys = []
    for token in tokens:
        if token.kind is TokenKind.IDENT:
            head, dot, rest = token.text.partition(".")
            if head in renaming:
                keys.append(_KIND_PREFIX[token.kind] + renaming[head] + dot + rest)
                continue
        keys.append(_token_key(token))
    return _hash_tokens(keys)
