"""The gate's data files: Mathlib's runners and the keywords of its commands, read from source, and
the options a proof may set.

All ship under `prover_assets/data/gate/` (see the README there for provenance), one JSON object
a line, and are read strictly: a line that is not an object of exactly the expected fields, a
name the lexer would not read as the gate matches it, or a name twice, raises `GateDataError`
naming the file and the line. The gate loads them once, at import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prover_assets.lean.lexer import LexError, TokenKind, code_tokens

__all__ = [
    "ALLOWED_OPTIONS",
    "COMMANDS",
    "DATA_DIR",
    "RUNNERS",
    "RUNNER_KINDS",
    "AllowedOption",
    "Command",
    "GateDataError",
    "Runner",
    "load_allowed_options",
    "load_commands",
    "load_runners",
]

DATA_DIR = Path(__file__).parents[1] / "data" / "gate"
RUNNER_KINDS = frozenset({"runs_code", "admits", "external_process", "sets_any_option", "command"})
_CATEGORIES = frozenset({"tactic", "conv", "term", "command"})
_COMMIT = re.compile(r"[0-9a-f]{40}")
_RUNNER_FIELDS = frozenset({"name", "kind", "category", "repo", "file", "commit", "why"})
_OPTION_FIELDS = frozenset({"name", "why"})
_COMMAND_FIELDS = frozenset({"name", "repo", "file", "commit", "declaration"})


class GateDataError(ValueError):
    """A gate data file is malformed; the message names the file and the line."""


@dataclass(frozen=True)
class Runner:
    """One piece of syntax refused wherever a candidate writes it, and where it was read."""

    name: str  # as the candidate writes it: an identifier (`run_tac`) or `<identifier>%`
    kind: str  # one of RUNNER_KINDS
    category: str  # the syntax category it extends
    repo: str
    file: str
    commit: str
    why: str

    @property
    def percent(self) -> bool:
        """Whether the syntax is a word glued to `%` (`eval%`), which Lean lexes as one token and
        the gate's lexer as an identifier then `%`."""
        return self.name.endswith("%")


@dataclass(frozen=True)
class Command:
    """The leading keyword of one piece of syntax in Lean's `command` category, as the pinned
    Mathlib (or the Lean core and the packages it builds on) declares it, and where it was read."""

    name: str  # as the candidate writes it: an identifier (`library_note`) or `<identifier>%`
    repo: str
    file: str
    commit: str
    declaration: str  # the declaration's source up to its category, the keyword quoted in it

    @property
    def percent(self) -> bool:
        """Whether the keyword is a word glued to `%` (`compile_inductive%`), which Lean lexes as
        one token and the gate's lexer as an identifier then `%`."""
        return self.name.endswith("%")


@dataclass(frozen=True)
class AllowedOption:
    """An option a candidate may set after its header, and why that is harmless."""

    name: str
    why: str


def _objects(path: Path, fields: frozenset[str]) -> list[tuple[int, dict[str, str]]]:
    """The (line number, object) pairs of `path`; each must have exactly `fields`, as
    non-empty strings."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GateDataError(f"{where}: not JSON: {exc}") from exc
        if not isinstance(row, dict) or set(row) != fields:
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise GateDataError(f"{where}: expected the fields {sorted(fields)}, got {keys}")
        empty = [key for key, value in row.items() if not isinstance(value, str) or not value]
        if empty:
            raise GateDataError(f"{where}: {empty[0]!r} must be a non-empty string")
        rows.append((number, row))
    if not rows:
        raise GateDataError(f"{path}: no entries")
    return rows


def _single_identifier(text: str) -> bool:
    """Whether the lexer reads `text` as exactly one identifier token (so the gate, which
    compares identifier tokens, can find it)."""
    try:
        tokens = code_tokens(text)
    except LexError:
        return False
    return len(tokens) == 1 and tokens[0].kind is TokenKind.IDENT and tokens[0].text == text


def _runner(where: str, row: dict[str, str]) -> Runner:
    runner = Runner(**row)
    if not _single_identifier(runner.name.removesuffix("%")):
        raise GateDataError(f"{where}: name {runner.name!r} is not one identifier (or one and %)")
    if runner.kind not in RUNNER_KINDS:
        raise GateDataError(f"{where}: kind {runner.kind!r} is not one of {sorted(RUNNER_KINDS)}")
    if runner.category not in _CATEGORIES:
        raise GateDataError(
            f"{where}: category {runner.category!r} is not one of {sorted(_CATEGORIES)}"
        )
    _check_source(where, runner.repo, runner.file, runner.commit)
    return runner


def _check_source(where: str, repo: str, file: str, commit: str) -> None:
    """Refuse a source that is not a Lean file of a repository at a full commit."""
    if _COMMIT.fullmatch(commit) is None:
        raise GateDataError(f"{where}: commit {commit!r} is not 40 lowercase hex digits")
    if not file.endswith(".lean") or repo.count("/") != 1:
        raise GateDataError(f"{where}: {repo}:{file} is not a Lean file of a repo")


def _command(where: str, row: dict[str, str]) -> Command:
    command = Command(**row)
    if not _single_identifier(command.name.removesuffix("%")):
        raise GateDataError(f"{where}: name {command.name!r} is not one identifier (or one and %)")
    _check_source(where, command.repo, command.file, command.commit)
    # The declaration must quote the keyword as its atom (`"library_note "`, `"instance"`): what
    # was read is the keyword's own declaration, not a use of it.
    if f'"{command.name}' not in command.declaration:
        raise GateDataError(f"{where}: the declaration does not quote {command.name!r} as an atom")
    return command


_Entry = TypeVar("_Entry", "Runner", "Command", "AllowedOption")


def _load_unique(
    path: Path, fields: frozenset[str], entry: Callable[[str, dict[str, Any]], _Entry]
) -> tuple[_Entry, ...]:
    """Each line of `path` made an entry by `entry` (given "file:line" and the row), names
    unique; raises GateDataError."""
    entries: dict[str, _Entry] = {}
    for number, row in _objects(path, fields):
        made = entry(f"{path}:{number}", row)
        if made.name in entries:
            raise GateDataError(f"{path}:{number}: {made.name!r} is listed twice")
        entries[made.name] = made
    return tuple(entries.values())


def load_runners(path: Path) -> tuple[Runner, ...]:
    """The runners listed in `path`, each validated; raises GateDataError."""
    return _load_unique(path, _RUNNER_FIELDS, _runner)


def load_commands(path: Path) -> tuple[Command, ...]:
    """The command keywords listed in `path`, each validated; raises GateDataError."""
    return _load_unique(path, _COMMAND_FIELDS, _command)


def _option(where: str, row: dict[str, Any]) -> AllowedOption:
    option = AllowedOption(**row)
    # An option name is a dotted identifier, as `set_option` reads it.
    if not _single_identifier(option.name):
        raise GateDataError(f"{where}: {option.name!r} is not an option name")
    return option


def load_allowed_options(path: Path) -> tuple[AllowedOption, ...]:
    """The allowed options listed in `path`, each validated; raises GateDataError."""
    return _load_unique(path, _OPTION_FIELDS, _option)


RUNNERS = load_runners(DATA_DIR / "mathlib_runners.jsonl")
COMMANDS = load_commands(DATA_DIR / "mathlib_commands.jsonl")
ALLOWED_OPTIONS = load_allowed_options(DATA_DIR / "allowed_options.jsonl")
