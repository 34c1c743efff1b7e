"""The static gate: lexical rules on the code the model displayed and on the code Lean gets.

Two readings, one decision. The rules run on the code exactly as the model displayed it, after
its header, because that is what becomes training data and because Goedel's compile view drops
every line starting with `set_option` or `open`: a banned option would otherwise never be seen.
The candidate's own header (its imports, options and opens before the theorem) is not judged
but for imports the problem lacks (`header_mismatch`): re-insertion drops it and Lean compiles
the trusted header, so nothing in it can serve the proof. With the problem's statement the
rules run again on the bytes the REPL receives (`lean_input`: re-insertion, then the compile
view), from the trusted `:= by` on, and every way the protocol's text transforms read the
candidate otherwise than Lean's lexer is refused
(`protocol_differential:<what>`, `extract.protocol_differentials`). Built on the lexer, so a
word in a comment or a string never counts, `sorry_free` is not `sorry`, and a name is compared
as Lean reads it (`«Lean».«addDecl»` is `Lean.addDecl`, `theorem «t»` declares `t`).

What a candidate may display is a list: its header, the trusted preamble repeated, `set_option`
of the allowed options (`data/gate/allowed_options.jsonl`, each with why it is harmless), one
`theorem` and its proof. Goedel's re-insertion drops everything else before the theorem (a
helper `lemma`, a `def`, an attribute), so a proof using it would fail for an unknown name and
one not using it would train on text Lean never checked: it is refused before Lean as
`dropped_by_reinsertion:<first token>`.

Nothing of the candidate may run while Lean elaborates, by structure rather than by word: the
proof is the theorem's one tactic block and nothing may follow it, on a new line left of its
column or on its own line after a command keyword of the pin (`proof_block`, the keywords read
from source in `data/gate/mathlib_commands.jsonl`: `banned:after_proof:<token>`,
`banned:unindented_proof`); a configuration argument holds data
only (`config_values`: `banned:config:<field>:<token>`); and the syntax of Mathlib that runs a
do block or a term, admits a goal or starts a process, read from Mathlib's source with its
provenance (`data/gate/mathlib_runners.jsonl`), is refused as a banned word.

Reasons are specific: `banned:<word>`, `banned:set_option:<option>`, `banned:#<command>`,
`banned:decl:<keyword>` (a declaration or command word after the theorem, also with a `?` or
`!` glued on: `variable?`), `banned:open_private`, `banned:open_in` (before the theorem),
`banned:import` (after the header), `banned:scope:<command>`, `banned:interpolated_string`,
`banned:after_proof:<token>`, `banned:unindented_proof`, `banned:config:<field>:<token>`,
`lex_error`, `no_theorem`, `dropped_by_reinsertion:<token>`, and with the problem's
statement `header_mismatch`, `preamble_mismatch:<first differing token>`, `statement_mismatch`,
`theorem_renamed`, `protocol_differential:<what>` (`compiled_text`: what Lean would get does
not even lex).

Preamble: a problem whose theorem is stated in declarations (MOBench's `abbrev solution`, a
`structure` and its `def`s) is accepted only if the candidate repeats that trusted preamble
token for token (comments and whitespace aside) right after its header; the repeated preamble
is exempt from the bans below, which hold for everything the candidate adds, before or after
the theorem. Lean never compiles the candidate's copy: re-insertion sends the trusted one.

Scope: the theorem Lean proves must be the trusted one, at the root, under the problem's name.
A candidate may add no command that changes the scope the statement is elaborated in
(`namespace`, `section`, `end`, `variable`, `include`, `omit`, `universe`, `export`,
`attribute`, an `open` after the header, a `_root_` name) beyond those the trusted statement
itself has (in its signature; its preamble is exempt as a whole). A whole plain command line in
the proof (`  open Real in`) does not count on the displayed reading: the compile view drops
it, and what Lean reads is counted on the compiled one. The REPL's statement check
(`statement_check_command`) catches what a lexical rule misses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from prover_assets.lean.config_values import config_reasons
from prover_assets.lean.extract import (
    DisplayedTheorem,
    ReinsertionError,
    displayed_theorem,
    dropped_command_tokens,
    lean_input,
    protocol_differentials,
)
from prover_assets.lean.gate_data import ALLOWED_OPTIONS as _ALLOWED_OPTION_ENTRIES
from prover_assets.lean.gate_data import RUNNERS
from prover_assets.lean.lexer import (
    LexError,
    Token,
    TokenKind,
    code_tokens,
    line_col,
    name_components,
)
from prover_assets.lean.proof_block import block_end_reason, proof_tokens
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.signature import theorem_signature
from prover_assets.lean.statement_identity import preamble_difference
from prover_assets.lean.statements import ParsedStatement, header_end, parse_statement
from prover_assets.lean.words import BANNED_WORDS, banned_word

__all__ = [
    "ALLOWED_OPTIONS",
    "BANNED_WORDS",
    "COMMAND_WORDS",
    "DECLARATION_KEYWORDS",
    "SCOPE_COMMANDS",
    "STATEMENT_REASONS",
    "static_check",
]

# The options a candidate may set after its header (resource limits, linter switches, printing),
# each with its reason in `data/gate/allowed_options.jsonl`.
ALLOWED_OPTIONS = frozenset(option.name for option in _ALLOWED_OPTION_ENTRIES)
# Runners written as a word glued to `%` (`eval%`): the lexer reads the word, then `%`.
PERCENT_RUNNERS = frozenset(runner.name for runner in RUNNERS if runner.percent)
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
# Commands of Lean core and Mathlib with no declaration keyword that still declare or register
# something (binder predicates, unification hints, simp-like tactics, simp attributes, a
# declaration's `where` and termination clauses). After the theorem a line left of the proof's
# column is refused whatever its word, and every command keyword of the pin wherever it stands
# in the proof (`proof_block`, `data/gate/mathlib_commands.jsonl`); these words are refused also
# by word, anywhere after the theorem.
COMMAND_WORDS = frozenset(
    {
        "binder_predicate",
        "unif_hint",
        "declare_simp_like_tactic",
        "register_simp_attr",
        "simproc_decl",
        "dsimproc_decl",
        "add_decl_doc",
        "seal",
        "unseal",
        "local",
        "scoped",
        "deriving",
        "where",
        "termination_by",
        "decreasing_by",
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
    tokens: Sequence[Token], start: int, trusted: ParsedStatement | None, unread: frozenset[int]
) -> list[str]:
    """`banned:scope:<command>` for each scope command used (from `start` on: the trusted
    preamble the candidate repeated is not counted; nor the `unread` tokens) more often than the
    trusted theorem does."""
    allowed: Counter[str] = Counter()
    if trusted is not None and trusted.signature is not None:
        allowed = _scope_counts(trusted.signature.tokens)
    counted = [t for i, t in enumerate(tokens) if i >= start and i not in unread]
    return [
        f"banned:scope:{command}"
        for command, count in sorted(_scope_counts(counted).items())
        if count > allowed[command]
    ]


def _unread_in_proof(
    code: str, tokens: Sequence[Token], proof: Sequence[Token] | None
) -> frozenset[int]:
    """The indices of `tokens` in the proof that the compile view drops as whole plain command
    lines (`  open Real in`): Lean never reads them, so they change no scope. What Lean does
    read is judged again on the compiled reading."""
    if not proof:
        return frozenset()
    return frozenset(
        i for i in dropped_command_tokens(code, tokens) if tokens[i].start >= proof[0].start
    )


def _add(reasons: list[str], reason: str) -> None:
    if reason not in reasons:
        reasons.append(reason)


def _header_imports(trusted: ParsedStatement) -> set[str]:
    """The imports a candidate's header may have: the trusted header's, and the protocol's own
    (extraction puts `GOEDEL_HEADER` before every block, whatever the problem's header)."""
    commands = (*trusted.header_commands, *GOEDEL_HEADER.split("\n"))
    return {command.split()[1] for command in commands if command.startswith("import")}


def static_check(
    code: str, *, statement: str | None = None, displayed: DisplayedTheorem | None = None
) -> list[str]:
    """Reasons to reject `code` without running Lean; empty means it passes.

    With the problem's `statement`, also `header_mismatch` (an import the problem's header does
    not have), `preamble_mismatch:<where>` (the trusted preamble is not repeated token for token
    right after the header: the first differing token named), `statement_mismatch` (the
    displayed theorem's signature tokens differ), the protocol's differentials, and the rules
    again on the proof as Lean gets it; the repeated preamble is trusted text, exempt from the
    word and scope bans. `displayed` is `code`'s displayed theorem when the caller has read it.
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
    # A candidate that does not repeat the trusted preamble has its own version of it before
    # the theorem: `preamble_mismatch` says so, and Lean compiles the trusted one.
    theorem_seen = _code_reasons(
        tokens,
        scan_start,
        reasons,
        report_dropped=mismatch is None,
        option_end=_header_in_end(tokens, body_start),
    )
    proof = proof_tokens(tokens[scan_start:])
    for reason in _scope_reasons(
        tokens, scan_start, trusted, _unread_in_proof(code, tokens, proof)
    ):
        _add(reasons, reason)
    if not theorem_seen:
        return [*reasons, *(r for r in ["no_theorem"] if r not in reasons)]
    tail = [
        *_structure_reasons(code, proof),
        *_statement_reasons(code, statement, displayed),
        *protocol_differentials(code),
    ]
    if statement is not None:
        tail += _compiled_reasons(statement, code)
    return reasons + [r for r in dict.fromkeys(tail) if r not in reasons]


def _code_reasons(
    tokens: Sequence[Token],
    start: int,
    reasons: list[str],
    *,
    report_dropped: bool,
    option_end: int,
) -> bool:
    """Add to `reasons` what the candidate's own tokens from `start` on may not do; whether a
    theorem was seen. Before the theorem only allowed `set_option`s may stand (the header's own
    `set_option ... in` ends at `option_end`): anything else is dropped by re-insertion (said
    once a theorem follows); after it nothing may be declared."""
    theorem_seen = False
    dropped: str | None = None
    for index in range(start, len(tokens)):
        text = tokens[index].text
        if not theorem_seen and text == "set_option":
            option_end = _option_end(tokens, index)
        elif not theorem_seen and index >= option_end and text != "theorem":
            dropped = dropped or text
        theorem_seen = _token_reasons(tokens, index, reasons, theorem_seen)
        if theorem_seen and dropped is not None:
            if report_dropped:
                _add(reasons, f"dropped_by_reinsertion:{dropped}")
            dropped = None
    return theorem_seen


def _header_in_end(tokens: Sequence[Token], body_start: int) -> int:
    """Past the `in` that ends the header's last command (`set_option maxHeartbeats 400000 in`
    right before the theorem, or an `open ... in`, refused on its own), else 0: the header scan
    stops at an `in`, which is no text of the candidate's own."""
    return body_start + 1 if body_start < len(tokens) and tokens[body_start].text == "in" else 0


def _option_end(tokens: Sequence[Token], index: int) -> int:
    """The index after `set_option <name> <value>` (and its `in`) at `index`."""
    end = index + 3
    return end + 1 if end < len(tokens) and tokens[end].text == "in" else end


def _token_reasons(
    tokens: Sequence[Token], index: int, reasons: list[str], theorem_seen: bool
) -> bool:
    """Add the reasons token `index` gives; whether a theorem has been seen after it."""
    token = tokens[index]
    following = tokens[index + 1].text if index + 1 < len(tokens) else ""
    text = token.text
    if token.kind is TokenKind.HASH_COMMAND:
        _add(reasons, f"banned:{text}")
    elif token.kind is TokenKind.STRING and "{" in text:
        _add(reasons, "banned:interpolated_string")  # `s!"{...}"` elaborates code in a string
    elif token.kind is not TokenKind.IDENT:
        if text == "@[" and theorem_seen:
            _add(reasons, "banned:decl:attribute")
        elif text == "+" and following == "native":
            _add(reasons, "banned:native_decide")
        elif text == "%" and (runner := _percent_runner(tokens, index)) is not None:
            _add(reasons, f"banned:{runner}")  # Mathlib's `eval% x` runs `x` in the interpreter
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
        return True
    elif theorem_seen and _command_word(text):
        _add(reasons, f"banned:decl:{text}")
    elif banned_word(text):
        _add(reasons, f"banned:{text}")
    return theorem_seen


def _command_word(text: str) -> bool:
    """Whether identifier `text` is a command word, also with a `?` or `!` glued on: the lexer
    reads `variable?` as one identifier, and Mathlib's `variable?` is a command."""
    return any(
        word in DECLARATION_KEYWORDS or word in COMMAND_WORDS for word in (text, text.rstrip("?!"))
    )


def _percent_runner(tokens: Sequence[Token], index: int) -> str | None:
    """The runner `<word>%` that the `%` at `index` ends, if the identifier right before it (with
    nothing between) makes one (`eval%` lexes as `eval` and `%`; `Polynomial.eval` alone and
    `eval % 2` are honest)."""
    before = tokens[index - 1] if index > 0 else None
    if before is None or before.end != tokens[index].start:
        return None
    name = f"{before.text}%"
    return name if name in PERCENT_RUNNERS else None


def _compiled_reasons(statement: str, code: str) -> list[str]:
    """The rules on the proof as the REPL receives it, from the trusted `:= by` on: a proof may
    change no scope at all (the trusted signature's own scope words stand before it).
    Re-insertion's own refusals are the verifier's to report."""
    try:
        compiled = lean_input(statement, code)
        tokens = code_tokens(compiled.proof)
    except ReinsertionError:
        return []
    except LexError:
        return ["protocol_differential:compiled_text"]
    reasons: list[str] = []
    for index in range(len(tokens)):
        _token_reasons(tokens, index, reasons, theorem_seen=True)
    base = compiled.proof_start
    shifted = [t._replace(start=t.start + base, end=t.end + base) for t in tokens]
    reasons += _structure_reasons(compiled.body, shifted)
    return reasons + [f"banned:scope:{command}" for command in sorted(_scope_counts(tokens))]


def _structure_reasons(text: str, proof: Sequence[Token] | None) -> list[str]:
    """What the tactic proof `proof` (offsets into `text`) may not hold by its shape: a token
    after the proof's block, a configuration that is not data."""
    if proof is None:
        return []
    ended = block_end_reason(text, proof)
    return [*([ended] if ended is not None else []), *config_reasons(proof)]


def _header_reasons(
    tokens: Sequence[Token],
    spans: Sequence[tuple[int, int]],
    header_reason: str | None,
    trusted: ParsedStatement | None,
) -> list[str]:
    """What the candidate's header may not do: end in an `open ... in` that scopes the theorem,
    or import what the trusted header does not. Its options and the names it opens are not
    judged: re-insertion drops the header, Lean compiles the trusted one, and what Lean never
    reads cannot serve the proof."""
    reasons = ["banned:open_in"] if header_reason == "open_in" else []
    allowed_imports = _header_imports(trusted) if trusted is not None else None
    for start, _ in spans:
        keyword = tokens[start].text
        argument = tokens[start + 1].text if start + 1 < len(tokens) else ""
        if keyword == "import" and allowed_imports is not None and argument not in allowed_imports:
            _add(reasons, "header_mismatch")
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
        and name_components(displayed.signature.name) != name_components(trusted.name)
    ):
        reasons.append("theorem_renamed")
    return reasons


def _open_in(tokens: Sequence[Token], index: int) -> bool:
    j = index + 1
    while j < len(tokens) and tokens[j].kind is TokenKind.IDENT and tokens[j].text != "in":
        j += 1
    return j < len(tokens) and tokens[j].text == "in"
