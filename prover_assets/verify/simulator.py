"""The demo's SIMULATED Lean: a separate process that speaks the Lean REPL's JSON protocol and
decides nothing about mathematics. `python -m prover_assets.verify.simulator --rule R --seed S
[--accept-share P]` is started by the `simulated` backend exactly as `lake exe repl` is started by
the local one, so the demo runs the product's REPL client, worker pool and verifier unchanged;
every verdict it leads to is labelled simulated.

Protocol (as leanprover-community/repl): a query is the lines read up to a whitespace-only line;
EOF on stdin exits 0; a query starting with `#` or `--` gets no answer; a query that is no JSON,
or no command, prints `uncaught exception: {"message": "Could not parse ..."}` on stderr and
exits 1; an answer is JSON followed by a blank line.
`{"cmd": ...}` without `env` starts a fresh environment; an unknown `env` is answered
`{"message": "Unknown environment."}`; every other command allocates a new env id, in order.
The client's canary (`lean/canary.py`) gets Lean's error for an identifier that names nothing. Answers are
written as the pinned REPL writes them (`IO.println`, never flushed: `CStdioStdout`), so a
client that reads a pipe waits as it would on the real one.

Answers, first match wins: the self-test's known-good proof compiles and its known-bad one gets
an error; a literal `sorry` gives a `sorries` entry and the sorry warning; a theorem is judged by
the rule, and a rejected one gets a Lean-shaped error; anything else compiles. `#print axioms X`
answers the standard axioms for a theorem the env declared. The rules (`describe_rule` words them
for the report):

- `planted_tactic`, the demo's positive control: a theorem is accepted exactly when its proof's
  last tactic is the one a hash of the seed picks from `DEMO_TACTICS` (the tactics the demo's
  base model is taught in equal shares), so a model that learns from its accepted proofs gets
  better by construction; the error is on that last tactic line.
- `seeded_theorems`, the null control: a theorem is accepted exactly when a hash of the seed and
  its name falls below `accept_share`: which problems can be solved is fixed before any model
  runs, whatever the proof says, so nothing a model learns can move it (a draw per code would
  not do: a model that repeats itself gets fewer draws); the error is on the first line after
  `:= by`.
- `seeded_share`: a theorem is accepted with probability `accept_share`, drawn from a hash of
  the seed and the command (the tests' mix of accepted and rejected proofs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prover_assets.lean.canary import canary_name
from prover_assets.lean.lexer import LexError, code_tokens
from prover_assets.lean.signature import first_theorem_signature
from prover_assets.verify.repl_stdio import serve

__all__ = [
    "DECLARED_AXIOMS",
    "DEMO_TACTICS",
    "RAW",
    "RULES",
    "SORRY_WARNING",
    "STANDARD_AXIOMS",
    "Env",
    "ReplSimulator",
    "closing_tactic",
    "describe_rule",
    "line_col",
    "main",
    "planted_tactic",
]

STANDARD_AXIOMS = ["propext", "Classical.choice", "Quot.sound"]
SORRY_WARNING = {"v4.9": "declaration uses 'sorry'", "v4.28": "declaration uses `sorry`"}
# Keys a `judge` reply may carry for `answer`: the axioms its declarations depend on, and that
# it is to be sent as it is (no env allocated).
DECLARED_AXIOMS = "__axioms__"
RAW = "__raw__"
_SELF_TEST_BAD_ERROR = {
    "severity": "error",
    "pos": {"line": 1, "column": 58},
    "endPos": {"line": 2, "column": 10},
    "data": "unsolved goals\n⊢ False",
}
# The tactics the demo's base model is taught to close proofs with, in equal shares; the
# planted rule accepts one of them.
DEMO_TACTICS = (
    "nlinarith [sq_nonneg (x - 1), sq_nonneg (x + 1)]",
    "norm_num",
    "omega",
    "simp_all",
    "linarith",
    "positivity",
)
RULES = ("planted_tactic", "seeded_theorems", "seeded_share")
_DECLARATION = re.compile(r"\b(theorem|lemma|def|example)\s+([^\s(:{\[]+)")
_NAMESPACE = re.compile(r"^\s*namespace\s+(\S+)")
_END = re.compile(r"^\s*end\s+(\S+)")
# The statement check (`statement_check_command`): the trusted signature, and the theorem it
# must follow from.
_STATEMENT_CHECK = re.compile(
    r"^example (?P<signature>.*) := by\n  apply _root_\.(?P<name>\S+) <;> assumption$",
    re.DOTALL,
)
_SORRY = re.compile(r"(?<![\w.'])sorry(?![\w'!?])")
_PRINT_AXIOMS = re.compile(r"^\s*#print\s+axioms\s+(\S+)\s*$")
# Lean-shaped errors for simulated rejections (texts as the real REPL prints them).
_SIMULATED_ERRORS = (
    "linarith failed to find a contradiction\ncase a\nx : ℝ\na✝ : x < 0\n⊢ False failed",
    "unsolved goals\nx : ℝ\n⊢ 0 ≤ x ^ 2 + 1",
    "nlinarith failed to find a contradiction",
    "The rfl tactic failed. Possible reasons:\n- The goal is not a reflexive relation",
    "type mismatch\n  h\nhas type\n  0 < x : Prop\nbut is expected to have type\n  0 ≤ x : Prop",
    "omega could not prove the goal:\na possible counterexample may satisfy the constraints",
)


@dataclass
class Env:
    """What an environment declared: each name's axioms, for `#print axioms`, and each
    theorem's signature tokens, for the statement check."""

    axioms: dict[str, list[str]] = field(default_factory=dict)
    signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)


def declared_names(command: str) -> list[str]:
    """The names `command` declares, inside the namespaces its `namespace ... end` lines open."""
    names: list[str] = []
    scopes: list[str] = []
    for line in command.split("\n"):
        if (opened := _NAMESPACE.match(line)) is not None:
            scopes.append(opened.group(1))
        elif (closed := _END.match(line)) is not None and scopes and scopes[-1] == closed.group(1):
            scopes.pop()
        names += [".".join([*scopes, name]) for _, name in _DECLARATION.findall(line)]
    return names


def declared_signatures(command: str) -> dict[str, tuple[str, ...]]:
    """Each theorem `command` declares, by its full name: its signature's token texts."""
    qualified = {name.rsplit(".", 1)[-1]: name for name in declared_names(command)}
    try:
        tokens = code_tokens(command)
    except LexError:
        return {}
    signatures = {}
    for index, token in enumerate(tokens):
        if token.text == "theorem" and (found := first_theorem_signature(tokens[index:])):
            name = qualified.get(found.name, found.name)
            signatures[name] = tuple(t.text for t in found.tokens)
    return signatures


def line_col(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and 0-based column of `offset` in `text`, as Lean reports positions."""
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1)


def planted_tactic(seed: int) -> str:
    """The name of the tactic the `planted_tactic` rule accepts: one of `DEMO_TACTICS`, picked by
    a hash of the seed."""
    draw = int(hashlib.sha256(f"planted_tactic|{seed}".encode()).hexdigest(), 16)
    return DEMO_TACTICS[draw % len(DEMO_TACTICS)].split()[0]


def closing_tactic(command: str) -> tuple[int, str]:
    """The 0-based index of the command's last line that is neither blank nor a `--` comment,
    and the name of the tactic it starts with (its first word)."""
    lines = command.split("\n")
    index = next(
        (
            i
            for i in reversed(range(len(lines)))
            if lines[i].strip() and not lines[i].lstrip().startswith("--")
        ),
        0,
    )
    words = lines[index].split()
    return index, words[0] if words else ""


def describe_rule(rule: str, seed: int, accept_share: float | None) -> str:
    """The rule in words, as the report prints it."""
    if rule == "seeded_theorems":
        return (
            f"seeded_theorems: a theorem is accepted exactly when a hash of seed {seed} and its "
            f"name falls below {accept_share}, whatever the proof says: which problems can be "
            "solved is fixed before any model runs; no effect is planted, so the loop should "
            "detect none"
        )
    if rule == "planted_tactic":
        return (
            f"planted_tactic: a proof is accepted exactly when its last tactic is "
            f"`{planted_tactic(seed)}`, picked by seed {seed} from the {len(DEMO_TACTICS)} tactics "
            "the demo's base model is taught in equal shares; an effect planted by construction, "
            "which a loop that learns from its accepted proofs must detect"
        )
    return (
        f"seeded_share: a proof is accepted with probability {accept_share}, drawn from a hash of "
        f"seed {seed} and its code, independent of anything a model can learn; no effect is "
        "planted, so the loop should detect none"
    )


def has_sorry(command: str) -> bool:
    """Whether `command` holds a literal `sorry` (not part of a longer name)."""
    return _SORRY.search(command) is not None


@dataclass
class ReplSimulator:
    """One simulated REPL's state and answers (see the module docstring)."""

    rule: str | None = None  # None: every theorem without `sorry` compiles
    accept_share: float = 0.0
    seed: int = 0
    warning_style: str = "v4.9"
    # What a header costs, as `import Mathlib` does in the real REPL: each command without an
    # env imports again (the env is fresh), taking this long and holding this much resident
    # memory for the process's life. With `olean_file`, the process's first import maps that
    # file (file-backed pages, shared by every process that maps it, as Lean maps each .olean
    # at its stored base address), and each later one holds the same size again as anonymous
    # memory (Lean's `read_module_data` when the base address is taken).
    import_delay_s: float = 0.0
    import_memory_mb: int = 0
    olean_file: Path | None = None
    imported: list[bytearray | mmap.mmap] = field(default_factory=list)
    envs: list[Env] = field(default_factory=list)
    commands: int = 0

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The REPL's answer to one request."""
        command, base = request["cmd"], request.get("env")
        if base is not None and not self.known_env(base):
            return {"message": "Unknown environment."}
        printed = _PRINT_AXIOMS.match(command) if base is not None else None
        if printed:
            return self.answer_print_axioms(command, printed.group(1), base)
        if base is None:
            time.sleep(self.import_delay_s)
            self.imported.append(self._imported_memory())
        reply = self.judge(command, base)
        if reply.pop(RAW, False):  # an answer as a REPL that lost its state gives: no env
            return reply
        return self.with_new_env(command, reply, reply.pop(DECLARED_AXIOMS, STANDARD_AXIOMS))

    def _imported_memory(self) -> bytearray | mmap.mmap:
        size = self.import_memory_mb << 20
        if self.olean_file is None or self.imported or size == 0:
            return bytearray(b"x" * size)  # resident, this process's own
        with open(self.olean_file, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
        for offset in range(0, size, mmap.PAGESIZE):  # fault every page in: resident, shared
            mapped[offset]
        return mapped

    def canary_answer(self, command: str, base: int | None) -> dict[str, Any] | None:
        """The answer to the client's canary (None for any other command): Lean's error for an
        identifier that names nothing, in the wording of this REPL's Lean (`resolveName`,
        Lean/Elab/Term.lean; capitalised since v4.28), where the REPL's `test/dup_msg` puts it."""
        name = canary_name(command) if base is not None else None
        if name is None:
            return None
        start = command.index(name)
        data = (
            f"unknown identifier '{name}'"
            if self.warning_style == "v4.9"
            else f"Unknown identifier `{name}`"
        )
        message = {
            "severity": "error",
            "pos": {"line": 1, "column": start},
            "endPos": {"line": 1, "column": start + len(name)},
            "data": data,
        }
        return {"messages": [message]}

    def answer_print_axioms(self, command: str, name: str, base: int) -> dict[str, Any]:
        """The answer to `#print axioms name` in env `base`."""
        return self.print_axioms(name, base)

    def respond(self, request: dict[str, Any], query: str) -> str:
        """The text written for one request (`query`: the lines it was read from)."""
        return json.dumps(self.answer(request), ensure_ascii=False) + "\n\n"

    def known_env(self, base: Any) -> bool:
        return isinstance(base, int) and 0 <= base < len(self.envs)

    def with_new_env(
        self, command: str, reply: dict[str, Any], axioms: Iterable[str] = STANDARD_AXIOMS
    ) -> dict[str, Any]:
        """`reply` with the id of the env the command creates (recording its declarations)."""
        names = declared_names(command)
        self.envs.append(Env({name: list(axioms) for name in names}, declared_signatures(command)))
        return {**reply, "env": len(self.envs) - 1}

    def judge(self, command: str, base: int | None = None) -> dict[str, Any]:
        """The answer's messages and sorries for a command (without its env)."""
        if (canary := self.canary_answer(command, base)) is not None:
            return canary
        if (checked := self.statement_check_answer(command, base)) is not None:
            return checked
        if "prover_assets_selftest_bad" in command:
            return {"messages": [dict(_SELF_TEST_BAD_ERROR)]}
        if "prover_assets_selftest_" in command:
            return {}
        return self.content_answer(command)

    def statement_check_answer(self, command: str, base: int | None) -> dict[str, Any] | None:
        """The answer to a statement check (None for any other command): Lean's error unless
        the theorem the env declared under that name has the trusted signature's tokens (a
        theorem of that very signature, from which Lean's `apply` derives the statement; the
        simulator derives nothing else)."""
        check = _STATEMENT_CHECK.match(command)
        if check is None or base is None:
            return None
        name = check.group("name")
        trusted = tuple(t.text for t in code_tokens(check.group("signature")))
        for env in reversed(self.envs[: base + 1]):
            if name in env.signatures:
                if env.signatures[name] == trusted:
                    return {}
                break
        line = check.group(0).count("\n") + 1
        return {
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": line, "column": 0},
                    "endPos": None,
                    "data": f"tactic 'apply' failed to unify {name} with the trusted statement",
                }
            ]
        }

    def content_answer(self, command: str) -> dict[str, Any]:
        """The answer by the command's content: its sorry, else the seeded draw."""
        if has_sorry(command):
            return self.sorry_answer(command)
        if self.rule == "planted_tactic" and "theorem" in command:
            return self.planted_answer(command)
        if self.rule == "seeded_share" and "theorem" in command:
            return self.seeded_answer(command, self.accept_share)
        if self.rule == "seeded_theorems" and (declared := _DECLARATION.search(command)):
            return self.seeded_answer(command, self.accept_share, declared.group(2))
        return {}

    def print_axioms(self, name: str, base: int) -> dict[str, Any]:
        """`#print axioms name` in env `base`: what the env that declared `name` recorded, under
        the name as it resolved (`_root_.` removed, as Lean prints it)."""
        asked = name
        name = name.removeprefix("_root_.")
        for env in reversed(self.envs[: base + 1]):
            if name in env.axioms:
                axioms = env.axioms[name]
                data = (
                    f"'{name}' depends on axioms: [{', '.join(axioms)}]"
                    if axioms
                    else f"'{name}' does not depend on any axioms"
                )
                severity = "info"
                break
        else:
            data, severity = f"unknown constant '{name}'", "error"
        self.envs.append(Env())
        end = len(f"#print axioms {asked}")
        message = {
            "severity": severity,
            "pos": {"line": 1, "column": 0},
            "endPos": {"line": 1, "column": end},
            "data": data,
        }
        return {"messages": [message], "env": len(self.envs) - 1}

    def seeded_answer(
        self, command: str, accept_share: float, drawn_on: str | None = None
    ) -> dict[str, Any]:
        """Accepted with probability `accept_share`, drawn from a hash of the seed and
        `drawn_on` (the command when None); otherwise a Lean-shaped error on the first line after
        the theorem's `:= by`."""
        draw = self.draw(command if drawn_on is None else drawn_on)
        if (draw % 10**6) / 10**6 < accept_share:
            return {}
        lines = command.split("\n")
        by_line = next((i for i, text in enumerate(lines) if ":= by" in text), 0)
        return simulated_error(lines, min(by_line + 1, len(lines) - 1), draw)

    def planted_answer(self, command: str) -> dict[str, Any]:
        """Accepted exactly when the proof's last tactic is the planted one; otherwise a
        Lean-shaped error on that last tactic's line."""
        index, tactic = closing_tactic(command)
        if tactic == planted_tactic(self.seed):
            return {}
        return simulated_error(command.split("\n"), index, self.draw(command))

    def draw(self, command: str) -> int:
        """A number drawn from a hash of the seed and the command."""
        digest = hashlib.sha256(command.encode("utf-8")).hexdigest()
        return int(hashlib.sha256(f"{self.seed}|{digest}".encode()).hexdigest(), 16)

    def sorry_answer(self, command: str, *, force: bool = False) -> dict[str, Any]:
        """A `sorries` entry at the first `sorry` (or the start, if `force`) and the sorry
        warning on the declaration that holds it; {} for a command without one."""
        sorry = _SORRY.search(command)
        if sorry is None and not force:
            return {}
        start = sorry.start() if sorry else 0
        line, column = line_col(command, start)
        # The warning is on the declaration that contains the sorry: the last one before it.
        before = list(_DECLARATION.finditer(command, 0, start if sorry else len(command)))
        declaration = before[-1] if before else None
        name_line, name_column, name_end = 1, 0, 0
        if declaration:
            name_line, name_column = line_col(command, declaration.start(2))
            name_end = name_column + len(declaration.group(2))
        return {
            "sorries": [
                {
                    "proofState": 0,
                    "pos": {"line": line, "column": column},
                    "goal": "⊢ True",
                    "endPos": {"line": line, "column": column + 5},
                }
            ],
            "messages": [
                {
                    "severity": "warning",
                    "pos": {"line": name_line, "column": name_column},
                    "endPos": {"line": name_line, "column": name_end},
                    "data": SORRY_WARNING[self.warning_style],
                }
            ],
        }


def simulated_error(lines: list[str], target: int, draw: int) -> dict[str, Any]:
    """A Lean-shaped error on line `target` (0-based) of the command, its text picked by `draw`."""
    text = lines[target]
    column = len(text) - len(text.lstrip())
    error = _SIMULATED_ERRORS[draw % len(_SIMULATED_ERRORS)]
    position = {"line": target + 1, "column": column}
    end = {"line": target + 1, "column": len(text)}
    return {"messages": [{"severity": "error", "pos": position, "endPos": end, "data": error}]}


def main(argv: list[str] | None = None) -> int:
    """Serve the simulated REPL on stdin/stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rule", choices=RULES, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--accept-share", type=float, default=0.0)
    args = parser.parse_args(argv)
    return serve(ReplSimulator(rule=args.rule, accept_share=args.accept_share, seed=args.seed))


if __name__ == "__main__":
    sys.exit(main())
