"""The static gate: lexical rules on the full Lean text, before any compile view.

It runs on the code exactly as the model displayed it (header + block), because Goedel's
compile view drops every line starting with `set_option` or `open` (indented `set_option ...
in` included): a banned option would otherwise never be seen. Built on the lexer, so a word in
a comment or a string never counts, and `sorry_free` is not `sorry`.

Reasons are specific: `banned:<word>`, `banned:set_option:<option>`, `banned:#<command>`,
`banned:decl:<keyword>` (a declaration after the theorem), `banned:open_private`,
`banned:open_in` (before the theorem), `banned:import` (after the header),
`banned:scope:<command>`, `lex_error`, `no_theorem`, and with the problem's statement
`header_mismatch`, `preamble_mismatch:<first differing token>`, `statement_mismatch` and
`theorem_renamed`.

Preamble: a problem whose theorem is stated in declarations (MOBench's `abbrev solution`, a
`structure` and its `def`s) is accepted only if the candidate repeats that trusted preamble
token for token (comments and whitespace aside) right after its header; the repeated preamble
is exempt from the bans below, which hold for everything the candidate adds, before or after
the theorem. Lean never compiles the candidate's copy: re-insertion sends the trusted one.

Scope: the theorem Lean proves must be the trusted one, at the root, under the problem's name.
A candidate may add no command that changes the scope the statement is elaborated in
(`namespace`, `section`, `end`, `variable`, `include`, `omit`, `universe`, `export`,
`attribute`, an `open` after the header, a `_root_` name) beyond those the trusted statement
itself has (in its signature; its preamble is exempt as a whole). What stays allowed before
the theorem: fully proven helper `lemma`/`theorem`/`def`
(models write them; at the root a helper cannot shadow an existing name, Lean refuses the
redeclaration) with `@[...]` attributes, `set_option` of the allowed options. The REPL's
statement check (`statement_check_command`) catches what a lexical rule misses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from prover_assets.lean.extract import DisplayedTheorem, displayed_theorem
from prover_assets.lean.lexer import LexError, Token, TokenKind, code_tokens, line_col
from prover_assets.lean.statements import (
    ParsedStatement,
    header_end,
    parse_statement,
    preamble_difference,
    theorem_signature,
)
from prover_assets.lean.words import BANNED_WORDS, banned_word

__all__ = [
    "ALLOWED_OPTIONS",
    "BANNED_WORDS",
    "DECLARATION_KEYWORDS",
    "SCOPE_COMMANDS",
    "STATEMENT_REASONS",
    "static_check",
]

ALLOWED_OPTIONS = frozenset({"maxHeartbeats", "maxRecDepth"})
# A new declaration after the displayed theorem: it would be compiled after the re-inserted
# statement, where it can change nothing about the theorem but can run or assert anything.
DECLARATION_KEYWORDS = frozenset(
    {
        "def",
        "lemma",
        "theorem",
        "instance",
        "abbrev",
        "structure",
        "class",
        "inductive",
        "attribute",
        "example",
        "noncomputable",
        "mutual",
        "private",
        "protected",
        "partial",
        "namespace",
        "section",
        "variable",
        "universe",
    }
)


# Commands that change what the statement's names mean or which hypotheses it has (a section
# `variable` the proof uses becomes a hypothesis of the theorem under Lean 4.9).
SCOPE_COMMANDS = frozenset(
    {
        "namespace",
        "section",
        "end",
        "variable",
        "include",
        "omit",
        "universe",
        "export",
        "attribute",
        "open",
    }
)
ROOT_PREFIX = "_root_"
# Reasons that compare the displayed theorem (and preamble) with the problem's, by the part
# before any `:`; `statement_check: record` keeps them out of the verdict (Goedel's protocol
# judges the re-inserted original, trusted preamble included).
STATEMENT_REASONS = frozenset({"statement_mismatch", "theorem_renamed", "preamble_mismatch"})


def _scope_counts(tokens: Sequence[Token]) -> Counter[str]:
    """How often each scope-changing command (and a `_root_` name) occurs among `tokens`."""
    counts: Counter[str] = Counter()
    for token in tokens:
        if token.kind is not TokenKind.IDENT:
            continue
        if token.text in SCOPE_COMMANDS:
            counts[token.text] += 1
        elif token.text.split(".")[0] == ROOT_PREFIX:
            counts[ROOT_PREFIX] += 1
    return counts


def _scope_reasons(
    tokens: Sequence[Token], start: int, trusted: ParsedStatement | None
) -> list[str]:
    """`banned:scope:<command>` for each scope command used (from `start` on: the trusted
    preamble the candidate repeated is not counted) more often than the trusted theorem does."""
    allowed: Counter[str] = Counter()
    if trusted is not None and trusted.signature is not None:
        allowed = _scope_counts(trusted.signature.tokens)
    return [
        f"banned:scope:{command}"
        for command, count in sorted(_scope_counts(tokens[start:]).items())
        if count > allowed[command]
    ]


def _word_reasons(token: Token) -> list[str]:
    return [f"banned:{token.text}"] if banned_word(token.text) else []


def _add(reasons: list[str], reason: str) -> None:
    if reason not in reasons:
        reasons.append(reason)


def _header_imports(trusted: ParsedStatement) -> set[str]:
    return {
        command.split()[1] for command in trusted.header_commands if command.startswith("import")
    }


def static_check(
    code: str, *, statement: str | None = None, displayed: DisplayedTheorem | None = None
) -> list[str]:
    """Reasons to reject `code` without running Lean; empty means it passes.

    With the problem's `statement`, also `header_mismatch` (an import the problem's header does
    not have), `preamble_mismatch:<where>` (the trusted preamble is not repeated token for token
    right after the header: the first differing token named) and `statement_mismatch` (the
    displayed theorem's signature tokens differ); the repeated preamble is trusted text, exempt
    from the word and scope bans. `displayed` is `code`'s displayed theorem when the caller has
    read it already.
    """
    try:
        tokens = code_tokens(code)
    except LexError:
        return ["lex_error"]
    trusted = parse_statement(statement) if statement is not None else None
    body_start, header_spans, header_reason = header_end(tokens)
    reasons = _header_reasons(tokens, header_spans, header_reason, trusted)
    scan_start, mismatch = _after_trusted_preamble(code, tokens, body_start, trusted)
    if mismatch is not None:
        _add(reasons, mismatch)
    theorem_seen = False
    for index in range(scan_start, len(tokens)):
        token = tokens[index]
        following = tokens[index + 1].text if index + 1 < len(tokens) else ""
        text = token.text
        if token.kind is TokenKind.HASH_COMMAND:
            _add(reasons, f"banned:{text}")
        elif token.kind is not TokenKind.IDENT:
            if text == "@[" and theorem_seen:
                _add(reasons, "banned:decl:attribute")
            elif text == "+" and following == "native":
                _add(reasons, "banned:native_decide")
        elif text == "import":
            _add(reasons, "banned:import")
        elif text == "set_option":
            if following not in ALLOWED_OPTIONS:
                _add(reasons, f"banned:set_option:{following}")
        elif text == "open":
            if following == "private":
                _add(reasons, "banned:open_private")
            elif not theorem_seen and _open_in(tokens, index):
                _add(reasons, "banned:open_in")
        elif text == "theorem" and not theorem_seen:
            theorem_seen = True
        elif theorem_seen and text in DECLARATION_KEYWORDS:
            _add(reasons, f"banned:decl:{text}")
        else:
            for reason in _word_reasons(token):
                _add(reasons, reason)
    for reason in _scope_reasons(tokens, scan_start, trusted):
        _add(reasons, reason)
    tail = ["no_theorem"] if not theorem_seen else _statement_reasons(code, statement, displayed)
    return reasons + [r for r in tail if r not in reasons]


def _header_reasons(
    tokens: Sequence[Token],
    spans: Sequence[tuple[int, int]],
    header_reason: str | None,
    trusted: ParsedStatement | None,
) -> list[str]:
    """What the candidate's header may not do: `open ... in`, an import the trusted header
    lacks, a banned option, `open private`."""
    reasons = ["banned:open_in"] if header_reason == "open_in" else []
    allowed_imports = _header_imports(trusted) if trusted is not None else None
    for start, _ in spans:
        keyword = tokens[start].text
        argument = tokens[start + 1].text if start + 1 < len(tokens) else ""
        if keyword == "import" and allowed_imports is not None and argument not in allowed_imports:
            _add(reasons, "header_mismatch")
        elif keyword == "set_option" and argument not in ALLOWED_OPTIONS:
            _add(reasons, f"banned:set_option:{argument}")
        elif keyword == "open" and argument == "private":
            _add(reasons, "banned:open_private")
    return reasons


def _after_trusted_preamble(
    code: str, tokens: Sequence[Token], body_start: int, trusted: ParsedStatement | None
) -> tuple[int, str | None]:
    """Where the candidate's own text starts (after the trusted preamble it repeats), and
    `preamble_mismatch:<where>` when it does not repeat it (then all of it is the candidate's)."""
    if trusted is None or not trusted.preamble_tokens:
        return body_start, None
    expected = trusted.preamble_tokens
    index = preamble_difference(expected, tokens[body_start:])
    if index is None:
        return body_start + len(expected), None
    position = body_start + index
    if position < len(tokens):
        line, _ = line_col(code, tokens[position].start)
        found = f"`{tokens[position].text}` at line {line}"
    else:
        found = "the end of the code"
    return body_start, f"preamble_mismatch:expected `{expected[index].text}`, found {found}"


def _statement_reasons(
    code: str, statement: str | None, displayed: DisplayedTheorem | None
) -> list[str]:
    if statement is None:
        return []
    displayed = displayed or displayed_theorem(code)
    reasons = [] if displayed.signature_matches(statement) else ["statement_mismatch"]
    trusted = theorem_signature(statement)
    if (
        displayed.signature is not None
        and trusted is not None
        and displayed.signature.name != trusted.name
    ):
        reasons.append("theorem_renamed")
    return reasons


def _open_in(tokens: Sequence[Token], index: int) -> bool:
    j = index + 1
    while j < len(tokens) and tokens[j].kind is TokenKind.IDENT and tokens[j].text != "in":
        j += 1
    return j < len(tokens) and tokens[j].text == "in"
