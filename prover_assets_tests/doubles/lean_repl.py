"""A protocol-faithful double of the Lean REPL (`lake exe repl`), for tests and the demo.

It is started exactly as the real REPL is (a separate executable speaking JSON over
stdin/stdout) and decides nothing about mathematics: every answer comes from the script the
caller wrote.

Protocol (as leanprover-community/repl):
- a query is the lines read up to a whitespace-only line; EOF on stdin exits 0;
- a query starting with `#` or `--` gets no answer; malformed JSON prints
  `uncaught exception: ...` on stderr and exits 1;
- an answer is pretty-printed JSON followed by a blank line, then a flush;
- `{"cmd": ...}` without `env` starts a fresh environment (the header, after --import-delay);
  with an unknown `env` it answers `{"message": "Unknown environment."}` and allocates nothing;
  every other command allocates a new env id, also when it has errors.

Verdicts, first match wins:
1. rules (--rules FILE, a JSON list): `{"match": {"sha256"|"regex"|"substring": ...},
   "reply": {...} | "action": "...", "messages_at": [{"severity", "at", "data"}],
   "axioms": [...], "raw": bool}`; a reply is sent as the answer (with the new env; with
   `raw`, exactly as written: no env, as a REPL that lost its state answers), `messages_at`
   places messages at the first occurrence of their `at` text in the command it received;
   a rule applies to commands (the header, a proof, a statement check), or with
   `"stage": "axioms"` to `#print axioms` only;
2. directives in Lean comments of the command, e.g.
   `--@fake error {"at": "nlinarith", "data": "linarith failed"}`, `--@fake sorry`,
   `--@fake axioms ["sorryAx"]`, `--@fake delay 2.5`, `--@fake hang`, `--@fake crash 3`,
   `--@fake oom`, `--@fake empty`, `--@fake warning {...}`, `--@fake probe {"connect": "h:p"}`
   (an info message saying what the process sees: its TMPDIR, whether it can connect);
3. --simulate-accept-share P --simulate-seed S (the demo's SIMULATED verifier): a seeded
   share P of proofs is accepted, the others get a Lean-shaped error (statements with a
   literal `sorry`, as in elaboration checks, get the default answer);
4. defaults: a literal `sorry` gives a `sorries` entry and the sorry warning; else `{"env": n}`.

`#print axioms X` answers from the record of the env that declared X (the standard axioms
unless a rule or directive said otherwise). Faults: hang, crash (exit code, optional partial
output and stderr), oom (allocate until RLIMIT_AS stops it), empty answer, --die-after N
commands, --startup-delay S. --warning-style v4.9 | v4.28 picks the sorry warning's quoting.
--chunked-output writes each answer in small pieces with pauses, mid-line, as an unflushed
v4.9 REPL's output can arrive. --log FILE appends each request and answer as a JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STANDARD_AXIOMS = ["propext", "Classical.choice", "Quot.sound"]
SORRY_WARNING = {"v4.9": "declaration uses 'sorry'", "v4.28": "declaration uses `sorry`"}
_DIRECTIVE = re.compile(r"--@fake\s+(\w+)\s*(.*)$", re.MULTILINE)
_DECLARATION = re.compile(r"\b(theorem|lemma|def|example)\s+([^\s(:{\[]+)")
_SORRY = re.compile(r"(?<![\w.'])sorry(?![\w'!?])")
_PRINT_AXIOMS = re.compile(r"^\s*#print\s+axioms\s+(\S+)\s*$")
# Lean-shaped errors for the simulated verifier (texts as the real REPL prints them).
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
    axioms: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Double:
    args: argparse.Namespace
    rules: list[dict[str, Any]]
    envs: list[Env] = field(default_factory=list)
    commands: int = 0

    # --- answers ---------------------------------------------------------------------------

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if "cmd" not in request:
            return {"message": "the REPL double answers only `cmd` requests"}
        command = request["cmd"]
        base = request.get("env")
        if base is not None and not (isinstance(base, int) and 0 <= base < len(self.envs)):
            return {"message": "Unknown environment."}
        printed = _PRINT_AXIOMS.match(command) if base is not None else None
        rule = self._rule_for(command, "axioms" if printed else "command")
        if rule is not None and rule.get("raw"):
            return self._ruled(command, rule)
        if printed and (rule is None or "reply" not in rule):
            if rule is not None:  # an action alone (delay, hang, crash), then the true answer
                self.act(rule["action"], rule.get("argument", ""))
            return self._print_axioms(printed.group(1), base)
        if base is None:
            time.sleep(self.args.import_delay)
        reply = self._ruled(command, rule) if rule is not None else self._scripted(command)
        axioms = reply.pop("__axioms__", STANDARD_AXIOMS)
        env_id = len(self.envs)
        env = Env({name: list(axioms) for _, name in _DECLARATION.findall(command)})
        self.envs.append(env)
        return {**reply, "env": env_id}

    def _print_axioms(self, name: str, base: int) -> dict[str, Any]:
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
        end = len(f"#print axioms {name}")
        message = {
            "severity": severity,
            "pos": {"line": 1, "column": 0},
            "endPos": {"line": 1, "column": end},
            "data": data,
        }
        return {"messages": [message], "env": len(self.envs) - 1}

    def _rule_for(self, command: str, stage: str) -> dict[str, Any] | None:
        digest = hashlib.sha256(command.encode("utf-8")).hexdigest()
        for rule in self.rules:
            if rule.get("stage", "command") != stage:
                continue
            match = rule["match"]
            if (
                match.get("sha256") == digest
                or ("regex" in match and re.search(match["regex"], command))
                or ("substring" in match and match["substring"] in command)
            ):
                return rule
        return None

    def _ruled(self, command: str, rule: dict[str, Any]) -> dict[str, Any]:
        if "action" in rule:
            self.act(rule["action"], rule.get("argument", ""))
        reply = dict(rule.get("reply", {}))
        for spec in rule.get("messages_at", []):
            message = self._message(command, spec.get("severity", "error"), spec)
            reply["messages"] = [*reply.get("messages", []), message]
        if "axioms" in rule:
            reply["__axioms__"] = rule["axioms"]
        return reply

    def _scripted(self, command: str) -> dict[str, Any]:
        digest = hashlib.sha256(command.encode("utf-8")).hexdigest()
        directives = _DIRECTIVE.findall(command)
        if directives:
            return self._directed(command, directives)
        if (
            self.args.simulate_accept_share is not None
            and "theorem" in command
            and not _has_sorry(command)
        ):
            return self._simulated(command, digest)
        return self._default(command)

    def _directed(self, command: str, directives: list[tuple[str, str]]) -> dict[str, Any]:
        reply: dict[str, Any] = {}
        messages: list[dict[str, Any]] = []
        for name, argument in directives:
            argument = argument.strip()
            if name in ("error", "warning", "info"):
                spec = json.loads(argument) if argument else {}
                messages.append(self._message(command, name, spec))
            elif name == "sorry":
                reply.update(self._default(command, force_sorry=True))
            elif name == "axioms":
                reply["__axioms__"] = json.loads(argument)
            elif name == "probe":
                messages.append(_probe(json.loads(argument or "{}")))
            else:
                self.act(name, argument)
        if messages:
            reply["messages"] = reply.get("messages", []) + messages
        return reply

    def _message(self, command: str, severity: str, spec: dict[str, Any]) -> dict[str, Any]:
        anchor = spec.get("at")
        # The anchor is looked for in the code, not in the directive lines themselves.
        code = _DIRECTIVE.sub(lambda m: " " * len(m.group(0)), command)
        offset = code.find(anchor) if anchor else -1
        if offset < 0:
            line, column, end_line, end_column = 1, 0, 1, 0
        else:
            line, column = _line_col(command, offset)
            end_line, end_column = _line_col(command, offset + len(anchor))
        end_pos = (
            None
            if spec.get("endPos") is None and "endPos" in spec
            else {"line": end_line, "column": end_column}
        )
        return {
            "severity": severity,
            "pos": {"line": line, "column": column},
            "endPos": end_pos,
            "data": spec.get("data", f"{severity} from the double"),
        }

    def _simulated(self, command: str, digest: str) -> dict[str, Any]:
        draw = int(hashlib.sha256(f"{self.args.simulate_seed}|{digest}".encode()).hexdigest(), 16)
        if (draw % 10**6) / 10**6 < self.args.simulate_accept_share:
            return {}
        lines = command.split("\n")
        by_line = next((i for i, text in enumerate(lines) if ":= by" in text), 0)
        target = min(by_line + 1, len(lines) - 1)
        text = lines[target]
        column = len(text) - len(text.lstrip())
        error = _SIMULATED_ERRORS[draw % len(_SIMULATED_ERRORS)]
        return {
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": target + 1, "column": column},
                    "endPos": {"line": target + 1, "column": len(text)},
                    "data": error,
                }
            ]
        }

    def _default(self, command: str, *, force_sorry: bool = False) -> dict[str, Any]:
        sorry = _SORRY.search(command)
        if sorry is None and not force_sorry:
            return {}
        start = sorry.start() if sorry else 0
        line, column = _line_col(command, start)
        # The warning is on the declaration that contains the sorry: the last one before it.
        before = list(_DECLARATION.finditer(command, 0, start if sorry else len(command)))
        declaration = before[-1] if before else None
        name_line, name_column, name_end = 1, 0, 0
        if declaration:
            name_line, name_column = _line_col(command, declaration.start(2))
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
                    "data": SORRY_WARNING[self.args.warning_style],
                }
            ],
        }

    # --- faults ----------------------------------------------------------------------------

    def act(self, action: str, argument: str) -> None:
        if action == "delay":
            time.sleep(float(argument or 1))
        elif action == "hang":
            while True:
                time.sleep(3600)
        elif action == "crash":
            parts = argument.split(maxsplit=1)
            code = int(parts[0]) if parts else 3
            if len(parts) > 1:
                sys.stdout.write(parts[1])
                sys.stdout.flush()
            sys.stderr.write("PANIC at the double: scripted crash\n")
            sys.stderr.flush()
            os._exit(code)
        elif action == "oom":
            hoard = []
            while True:
                hoard.append(bytearray(64 << 20))
        elif action == "empty":
            raise _EmptyAnswer
        else:
            raise ValueError(f"unknown action {action!r}")


class _EmptyAnswer(Exception):
    pass


def _probe(spec: dict[str, Any]) -> dict[str, Any]:
    """What the REPL's own process sees: its TMPDIR, and whether it can reach a TCP address."""
    import socket

    report: dict[str, Any] = {"tmpdir": os.environ.get("TMPDIR")}
    if "connect" in spec:
        host, port = spec["connect"].rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                report["connect"] = "ok"
        except OSError as exc:
            report["connect"] = f"blocked: {exc}"
    return {
        "severity": "info",
        "pos": {"line": 1, "column": 0},
        "endPos": None,
        "data": json.dumps(report),
    }


def _has_sorry(command: str) -> bool:
    return _SORRY.search(command) is not None


def _line_col(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1)


def _write(text: str, chunked: bool) -> None:
    data = text.encode("utf-8")
    if not chunked:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    for start in range(0, len(data), 7):
        sys.stdout.buffer.write(data[start : start + 7])
        sys.stdout.buffer.flush()
        time.sleep(0.002)


def _log(path: str | None, entry: dict[str, Any]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _read_query(stdin: Any) -> str | None:
    """Lines up to a whitespace-only line; None at EOF with nothing read."""
    lines: list[str] = []
    for line in stdin:
        if not line.strip():
            if lines:
                return "".join(lines)
            return ""
        lines.append(line)
    return "".join(lines) if lines else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules")
    parser.add_argument("--log")
    parser.add_argument("--warning-style", choices=sorted(SORRY_WARNING), default="v4.9")
    parser.add_argument("--import-delay", type=float, default=0.0)
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--die-after", type=int)
    parser.add_argument("--chunked-output", action="store_true")
    parser.add_argument("--simulate-accept-share", type=float)
    parser.add_argument("--simulate-seed", type=int, default=0)
    args = parser.parse_args(argv)
    rules = json.loads(Path(args.rules).read_text(encoding="utf-8")) if args.rules else []
    double = Double(args, rules)
    time.sleep(args.startup_delay)
    stdin = sys.stdin
    while True:
        query = _read_query(stdin)
        if query is None:
            return 0
        if not query.strip():
            sys.stderr.write("uncaught exception: empty query\n")
            return 1
        if query.lstrip().startswith(("#", "--")):
            continue
        try:
            request = json.loads(query)
        except json.JSONDecodeError as exc:
            sys.stderr.write(f"uncaught exception: {exc}\n")
            return 1
        double.commands += 1
        if args.die_after is not None and double.commands > args.die_after:
            _log(args.log, {"request": request, "event": "died"})
            sys.stderr.write("the double died after its scripted number of commands\n")
            return 137
        try:
            answer = double.answer(request)
        except _EmptyAnswer:
            _log(args.log, {"request": request, "event": "empty"})
            _write("\n\n", args.chunked_output)
            continue
        _log(args.log, {"request": request, "raw": query, "answer": answer})
        _write(json.dumps(answer, ensure_ascii=False, indent=1) + "\n\n", args.chunked_output)


if __name__ == "__main__":
    sys.exit(main())
