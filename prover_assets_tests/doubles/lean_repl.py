"""A protocol-faithful double of the Lean REPL (`lake exe repl`), for tests: the product's REPL
simulator (`prover_assets.verify.simulator`) with scripted answers and faults added.

It is started exactly as the real REPL is (a separate executable speaking JSON over
stdin/stdout) and decides nothing about mathematics: every answer comes from the script the
caller wrote.

Protocol (as leanprover-community/repl):
- a query is the lines read up to a whitespace-only line; EOF on stdin exits 0;
- a query starting with `#` or `--` gets no answer; malformed JSON prints
  `uncaught exception: ...` on stderr and exits 1;
- an answer is pretty-printed JSON followed by a blank line, written as the pinned REPL
  writes it (`IO.println`, no flush: C stdio buffers it in 4 KiB blocks on a pipe and by line
  on a terminal), or flushed after each answer with --flush-each (REPLs since 4fc1e6d);
- `{"cmd": ...}` without `env` starts a fresh environment: the header, imported anew each time,
  at the cost of --import-delay seconds and --import-memory-mb resident MB held from then on
  (with --olean-file FILE, the process's first import maps FILE, shared with every process
  that maps it, and each later one holds the same size again as its own, as Lean's does);
  with an unknown `env` it answers `{"message": "Unknown environment."}` and allocates nothing;
  every other command allocates a new env id, also when it has errors.

Verdicts, first match wins:
1. rules (--rules FILE, a JSON list): `{"match": {"sha256"|"regex"|"substring": ...},
   "reply": {...} | "action": "...", "messages_at": [{"severity", "at", "data"}],
   "axioms": [...], "raw": bool}`; a reply is sent as the answer (with the new env; with
   `raw`, exactly as written: no env, as a REPL that lost its state answers), `messages_at`
   places messages at the first occurrence of their `at` text in the command it received;
   a rule applies to commands (the header, a proof, a statement check), or with
   `"stage": "axioms"` to `#print axioms` only; with `"times": N` only to the first N matching
   commands across every process started with the same rules file;
2. directives in Lean comments of the command, e.g.
   `--@fake error {"at": "nlinarith", "data": "linarith failed"}`, `--@fake sorry`,
   `--@fake axioms ["sorryAx"]`, `--@fake delay 2.5`, `--@fake hang`, `--@fake crash 3`,
   `--@fake oom`, `--@fake grow MB` (allocate and hold MB), `--@fake empty`, `--@fake garbage TEXT`
   (TEXT as the answer), `--@fake warning {...}`, `--@fake probe {"connect": "h:p"}`
   (an info message saying what the process sees: its TMPDIR, TMP, TEMP, working directory,
   RLIMIT_AS, whether it can connect), `--@fake print "JSON string"` (that text written to
   stdout while the command runs, ahead of its answer, as code a proof runs can print: the
   pinned REPL's frontend isolates nothing, so the double does not either),
   `--@fake write {"path": p, "text": t}` (the command writes a file; an info message says
   whether the file was there to see and whether the write went through); `print` is an action for rules too, its argument a JSON string;
3. the simulator's answers: the client's canary (`#check canary_<nonce>`) gets Lean's
   `unknown identifier` error; a statement check (`example <signature> := by apply _root_.<name>
   <;> assumption`) fails unless the env declared the named theorem with the trusted signature's tokens;
   a literal `sorry` gives a `sorries` entry and the sorry warning; else `{"env": n}` (the
   double knows no self-test).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prover_assets.verify.repl_stdio import CStdioStdout, serve
from prover_assets.verify.simulator import (
    DECLARED_AXIOMS,
    RAW,
    SORRY_WARNING,
    STANDARD_AXIOMS,
    ReplSimulator,
    line_col,
)

_DIRECTIVE = re.compile(r"--@fake\s+(\w+)\s*(.*)$", re.MULTILINE)


@dataclass
class Double(ReplSimulator):
    """The simulator, answering by the caller's rules and directives first."""

    rules: list[dict[str, Any]] = field(default_factory=list)
    rules_path: str | None = None  # where a rule's `times` uses are counted, across processes
    log_path: str | None = None  # each request and answer appended as a JSON line
    die_after: int | None = None  # exit 137 on the command after this many
    # Where the answers go (`serve`'s writer): text a command prints goes the same way, first.
    emit: Callable[[str], None] | None = None
    request: dict[str, Any] = field(default_factory=dict)  # the one being answered

    def respond(self, request: dict[str, Any], query: str) -> str:
        if self.die_after is not None and self.commands > self.die_after:
            _log(self.log_path, {"request": request, "event": "died"})
            sys.stderr.write("the double died after its scripted number of commands\n")
            raise SystemExit(137)
        self.request = request
        try:
            answer = self.answer(request)
        except _EmptyAnswer:
            _log(self.log_path, {"request": request, "event": "empty"})
            return "\n\n"
        except _RawAnswer as raw:
            _log(self.log_path, {"request": request, "event": "garbage"})
            return f"{raw}\n\n"
        entry = {"request": request, "raw": query, "answer": answer, "pid": os.getpid()}
        _log(self.log_path, entry)
        return json.dumps(answer, ensure_ascii=False, indent=1) + "\n\n"

    def answer_print_axioms(self, command: str, name: str, base: int) -> dict[str, Any]:
        rule = self._rule_for(command, "axioms")
        if rule is not None and rule.get("raw"):
            return self._ruled(command, rule)
        if rule is not None and "reply" in rule:
            reply = self._ruled(command, rule)
            return self.with_new_env(command, reply, reply.pop(DECLARED_AXIOMS, STANDARD_AXIOMS))
        if rule is not None:  # an action alone (delay, hang, crash), then the true answer
            self.act(rule["action"], rule.get("argument", ""))
        return super().answer_print_axioms(command, name, base)

    def judge(self, command: str, base: int | None = None) -> dict[str, Any]:
        """The caller's rule, else its directives, else the simulator's answer to a preamble
        statement check, else the content alone: the double knows no self-test (a test that
        wants a working instrument scripts it)."""
        rule = self._rule_for(command, "command")
        if rule is not None:
            return {**self._ruled(command, rule), RAW: bool(rule.get("raw"))}
        if (canary := self.canary_answer(command, base)) is not None:
            return canary
        directives = _DIRECTIVE.findall(command)
        if directives:
            return self._directed(command, directives)
        checked = self.statement_check_answer(command, base)
        return checked if checked is not None else self.content_answer(command)

    def _rule_for(self, command: str, stage: str) -> dict[str, Any] | None:
        digest = hashlib.sha256(command.encode("utf-8")).hexdigest()
        for index, rule in enumerate(self.rules):
            if rule.get("stage", "command") != stage:
                continue
            match = rule["match"]
            if (
                match.get("sha256") == digest
                or ("regex" in match and re.search(match["regex"], command))
                or ("substring" in match and match["substring"] in command)
            ) and self._use(index, rule):
                return rule
        return None

    def _use(self, index: int, rule: dict[str, Any]) -> bool:
        """Whether a rule with `times: N` has uses left (counted in files beside the rules, so
        that every REPL process of a pool, restarts included, shares the count)."""
        if "times" not in rule:
            return True
        for use in range(rule["times"]):
            try:
                os.close(os.open(f"{self.rules_path}.{index}.{use}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue
            return True
        return False

    def _ruled(self, command: str, rule: dict[str, Any]) -> dict[str, Any]:
        if "action" in rule:
            self.act(rule["action"], rule.get("argument", ""))
        reply = dict(rule.get("reply", {}))
        for spec in rule.get("messages_at", []):
            message = self._message(command, spec.get("severity", "error"), spec)
            reply["messages"] = [*reply.get("messages", []), message]
        if "axioms" in rule:
            reply[DECLARED_AXIOMS] = rule["axioms"]
        return reply

    def _directed(self, command: str, directives: list[tuple[str, str]]) -> dict[str, Any]:
        reply: dict[str, Any] = {}
        messages: list[dict[str, Any]] = []
        for name, argument in directives:
            argument = argument.strip()
            if name in ("error", "warning", "info"):
                spec = json.loads(argument) if argument else {}
                messages.append(self._message(command, name, spec))
            elif name == "sorry":
                reply.update(self.sorry_answer(command, force=True))
            elif name == "axioms":
                reply[DECLARED_AXIOMS] = json.loads(argument)
            elif name == "probe":
                messages.append(_probe(json.loads(argument or "{}")))
            elif name == "write":
                messages.append(_write_file(json.loads(argument)))
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
            line, column = line_col(command, offset)
            end_line, end_column = line_col(command, offset + len(anchor))
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
        elif action == "grow":
            _HELD.append(bytearray(b"x" * (int(argument) << 20)))  # touched: resident
        elif action == "empty":
            raise _EmptyAnswer
        elif action == "garbage":
            raise _RawAnswer(argument)
        elif action == "print":
            assert self.emit is not None, "print needs the writer serve() answers with"
            # Logged first: a client that reads the text may kill this process at once.
            text = json.loads(argument)
            entry = {"request": self.request, "event": "printed", "text": text, "pid": os.getpid()}
            _log(self.log_path, entry)
            self.emit(text)
        else:
            raise ValueError(f"unknown action {action!r}")


_HELD: list[bytearray] = []


class _EmptyAnswer(Exception):
    pass


class _RawAnswer(Exception):
    """Answer with this text (then the blank line) instead of a JSON answer."""


def _probe(spec: dict[str, Any]) -> dict[str, Any]:
    """What the REPL's own process sees: its TMPDIR, its address-space limit, and whether it
    can reach a TCP address."""
    import resource
    import socket

    report: dict[str, Any] = {
        "tmpdir": os.environ.get("TMPDIR"),
        "tmp": os.environ.get("TMP"),
        "temp": os.environ.get("TEMP"),
        "cwd": os.getcwd(),
        "address_space_limit": resource.getrlimit(resource.RLIMIT_AS)[0],
        "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"),
        "lean_path": os.environ.get("LEAN_PATH"),
    }
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


def _write_file(spec: dict[str, Any]) -> dict[str, Any]:
    """Write `text` to `path` as code a proof runs could: an info message saying what came of
    it."""
    path = Path(spec["path"])
    report: dict[str, Any] = {"path": spec["path"], "existed": path.exists()}
    try:
        path.write_text(spec["text"], encoding="utf-8")
        report["written"] = True
    except OSError as exc:
        report.update(written=False, error=str(exc))
    return {
        "severity": "info",
        "pos": {"line": 1, "column": 0},
        "endPos": None,
        "data": json.dumps(report),
    }


def _write_flushed(text: str) -> None:
    """As a REPL since 4fc1e6d writes: each answer flushed."""
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def _write_chunked(text: str) -> None:
    data = text.encode("utf-8")
    for start in range(0, len(data), 7):
        sys.stdout.buffer.write(data[start : start + 7])
        sys.stdout.buffer.flush()
        time.sleep(0.002)


def _log(path: str | None, entry: dict[str, Any]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _olean_file(path: str | None, size_mb: int) -> Path | None:
    """The file that stands for Mathlib's .olean files, `size_mb` of them, shared by every
    process of the double given the same path (written once, atomically)."""
    if path is None:
        return None
    olean = Path(path)
    if not olean.exists() or olean.stat().st_size < size_mb << 20:
        partial = olean.with_name(f"{olean.name}.{os.getpid()}.tmp")
        with open(partial, "wb") as handle:
            for _ in range(size_mb):  # written, not sparse: a hole may map the shared zero page
                handle.write(b"o" * (1 << 20))
        os.replace(partial, olean)
    return olean


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules")
    parser.add_argument("--log")
    parser.add_argument("--warning-style", choices=sorted(SORRY_WARNING), default="v4.9")
    parser.add_argument("--import-delay", type=float, default=0.0)
    parser.add_argument("--import-memory-mb", type=int, default=0)
    parser.add_argument("--olean-file")
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--die-after", type=int)
    parser.add_argument("--chunked-output", action="store_true")
    parser.add_argument("--flush-each", action="store_true")
    args = parser.parse_args(argv)
    rules = json.loads(Path(args.rules).read_text(encoding="utf-8")) if args.rules else []
    double = Double(
        warning_style=args.warning_style,
        import_delay_s=args.import_delay,
        import_memory_mb=args.import_memory_mb,
        olean_file=_olean_file(args.olean_file, args.import_memory_mb),
        rules=rules,
        rules_path=args.rules,
        log_path=args.log,
        die_after=args.die_after,
    )
    time.sleep(args.startup_delay)
    # As the pinned REPL writes (never flushed) unless told to write as a current one.
    stdout = CStdioStdout()
    double.emit = (
        _write_chunked
        if args.chunked_output
        else _write_flushed
        if args.flush_each
        else stdout.write
    )
    try:
        return serve(double, write=double.emit)
    finally:
        stdout.close()


if __name__ == "__main__":
    sys.exit(main())
