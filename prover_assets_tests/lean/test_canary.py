"""The canary: its command, its nonce, and which answers are Lean's to it."""

import re

import pytest

from prover_assets.lean.canary import answers_canary, canary_command, canary_name, new_nonce

NONCE = "canary_" + "0123456789abcdef" * 2


def error(data: str, severity: str = "error") -> dict:
    # Where Lean puts it: on the name, after `#check ` (the REPL's test/dup_msg: column 7).
    end = {"line": 1, "column": 7 + len(NONCE)}
    return {"severity": severity, "pos": {"line": 1, "column": 7}, "endPos": end, "data": data}


def test_the_canary_checks_a_name_that_its_answer_must_name():
    assert canary_command(NONCE) == "#check canary_0123456789abcdef0123456789abcdef"
    assert canary_name(canary_command(NONCE)) == NONCE


@pytest.mark.parametrize(
    "command",
    [
        "#check canary_0a",
        f"#check {NONCE}\n#exit",
        f"example : True := {NONCE}",
        f" #check {NONCE}",
    ],
    ids=["short_nonce", "more_after_it", "another_command", "indented"],
)
def test_no_other_command_is_a_canary(command):
    assert canary_name(command) is None


def test_each_nonce_is_128_fresh_bits_in_an_identifier():
    nonces = {new_nonce() for _ in range(1000)}
    assert len(nonces) == 1000
    assert all(re.fullmatch(r"canary_[0-9a-f]{32}", nonce) for nonce in nonces)


@pytest.mark.parametrize(
    ("answer", "is_leans"),
    [
        ({"messages": [error(f"unknown identifier '{NONCE}'")], "env": 5}, True),
        ({"messages": [error(f"Unknown identifier `{NONCE}`")], "env": 5}, True),
        ({"messages": [error("unknown identifier 'canary_" + "f" * 32 + "'")], "env": 5}, False),
        ({"messages": [error(f"unknown identifier '{NONCE}'", "info")], "env": 5}, False),
        ({"env": 5}, False),
        ({"message": f"unknown identifier '{NONCE}'"}, False),
        ({"messages": ["unknown identifier"], "env": 5}, False),
    ],
    ids=[
        "v4_9",
        "v4_28",
        "another_nonce",
        "not_an_error",
        "clean",
        "error_answer",
        "not_a_message",
    ],
)
def test_only_an_error_naming_the_nonce_answers_the_canary(answer, is_leans):
    assert answers_canary(answer, NONCE) is is_leans
