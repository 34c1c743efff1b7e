"""The canary: a command only Lean can answer, sent after a job's last command.

Code a proof runs while Lean elaborates it can print to the REPL's stdout, where the client
reads answers. It can guess the `env` ids the client expects (they are allocated in order), so
a printed answer can carry the right one; it cannot guess a nonce drawn after it ran. The canary
is `#check canary_<nonce>`, sent in the header's env. The pinned REPL answers every command with
a new env id, errors or not (`runCommand` records a snapshot whatever the messages,
`REPL/Main.lean` at 7df77c0), and Lean reports an identifier that names nothing as `unknown
identifier '<name>'` (`resolveName`, Lean/Elab/Term.lean; ``Unknown identifier `<name>` `` since
v4.28): the REPL's own test at the pin, `test/dup_msg`, sends `{"cmd": "#check g", "env": 1}`
and expects exactly that error and `"env": 2`. So the nonce comes back inside an error,
deterministically, and nothing runs (`#check` elaborates a name; no `#eval`, no tactic). Its
answer must be the next one read: any text read before it was not Lean's.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

__all__ = ["answers_canary", "canary_command", "canary_name", "new_nonce"]

_PREFIX = "canary_"
_COMMAND = re.compile(r"^#check (canary_[0-9a-f]{32})$")


def new_nonce() -> str:
    """A fresh identifier no proof can have seen: `canary_` and 128 random bits in hex."""
    return _PREFIX + secrets.token_hex(16)


def canary_command(nonce: str) -> str:
    """The canary's command for `nonce` (an identifier that names nothing)."""
    return f"#check {nonce}"


def canary_name(command: str) -> str | None:
    """The nonce when `command` is a canary, else None (how a simulated REPL knows one)."""
    found = _COMMAND.match(command)
    return found.group(1) if found else None


def answers_canary(answer: Mapping[str, Any], nonce: str) -> bool:
    """Whether `answer` is Lean's to the canary of `nonce`: an error naming the nonce. The
    wording is not compared (it changed between Lean versions); 128 random bits are."""
    return any(
        isinstance(message, Mapping)
        and message.get("severity") == "error"
        and nonce in str(message.get("data", ""))
        for message in answer.get("messages") or []
    )
