"""The verifier's self-test: proofs whose verdicts are known, judged by the backend before it
judges any sample. A verifier that fails it is a broken instrument, not a judge of proofs.

The header a batch warms its workers with (`batch_header`) is chosen here too: the self-test
runs under it, so the batch starts warm and each worker imports it once.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.statements import statement_check_command
from prover_assets.records.validity import CheckOutcome
from prover_assets.verify.backends import LeanBackend
from prover_assets.verify.known_proofs import (
    SELF_TEST_AUTO_BOUND_GOOD,
    SELF_TEST_AUTO_BOUND_STATEMENT,
    SELF_TEST_BAD,
    SELF_TEST_GOOD,
    SELF_TEST_PREAMBLE_CHANGED,
    SELF_TEST_PREAMBLE_GOOD,
    SELF_TEST_PREAMBLE_STATEMENT,
    SELF_TEST_VARIABLE_GOOD,
    SELF_TEST_VARIABLE_STATEMENT,
    SELF_TEST_VARIABLE_WEAKER,
)
from prover_assets.verify.worker import LeanJob, LeanResult

__all__ = ["SELF_TEST_JOBS", "batch_header", "self_test"]


def batch_header(headers: Iterable[str]) -> str:
    """The header most of a batch's problems carry (the protocol's for none): the one its
    workers warm with and its self-test runs under, so that they import it once."""
    counts = Counter(headers)
    if not counts:
        return GOEDEL_HEADER.strip()
    return min(counts, key=lambda header: (-counts[header], header))


class _Expect(enum.Enum):
    ACCEPTED = "accepted"  # complete, the standard axioms read, its statement check passed
    NOT_COMPILED = "rejected"  # Lean's errors
    STATEMENT_REFUSED = "refused by the statement check"  # compiles, fails the check
    NOT_ACCEPTED = "refused"  # either of the two


@dataclass(frozen=True)
class _SelfTestCase:
    key: str
    what: str  # in words, for the outcome's description
    body: str
    theorem_name: str
    statement: str | None  # whose statement check the proof gets
    expect: _Expect


_SELF_TEST_CASES = (
    _SelfTestCase(
        "good", "known-good", SELF_TEST_GOOD, "prover_assets_selftest_good", None, _Expect.ACCEPTED
    ),
    _SelfTestCase(
        "bad", "known-bad", SELF_TEST_BAD, "prover_assets_selftest_bad", None, _Expect.NOT_COMPILED
    ),
    _SelfTestCase(
        "preamble",
        "preamble proof",
        SELF_TEST_PREAMBLE_GOOD,
        "prover_assets_selftest_preamble",
        SELF_TEST_PREAMBLE_STATEMENT,
        _Expect.ACCEPTED,
    ),
    _SelfTestCase(
        "changed",
        "changed statement",
        SELF_TEST_PREAMBLE_CHANGED,
        "prover_assets_selftest_preamble",
        SELF_TEST_PREAMBLE_STATEMENT,
        _Expect.STATEMENT_REFUSED,
    ),
    _SelfTestCase(
        "auto_bound",
        "auto-bound implicit",
        SELF_TEST_AUTO_BOUND_GOOD,
        "prover_assets_selftest_auto_bound",
        SELF_TEST_AUTO_BOUND_STATEMENT,
        _Expect.ACCEPTED,
    ),
    _SelfTestCase(
        "variable",
        "section variables",
        SELF_TEST_VARIABLE_GOOD,
        "prover_assets_selftest_variable",
        SELF_TEST_VARIABLE_STATEMENT,
        _Expect.ACCEPTED,
    ),
    _SelfTestCase(
        "variable_used",
        "a hypothesis the statement lacks",
        SELF_TEST_VARIABLE_WEAKER,
        "prover_assets_selftest_variable",
        SELF_TEST_VARIABLE_STATEMENT,
        _Expect.NOT_ACCEPTED,
    ),
)


SELF_TEST_JOBS = len(_SELF_TEST_CASES)  # the proofs one self-test judges


def _self_test_job(case: _SelfTestCase, budget_s: float, header: str) -> LeanJob:
    check = None
    if case.statement is not None:
        check = statement_check_command(GOEDEL_HEADER + case.statement)
    return LeanJob(
        ("selftest", case.key),
        header,
        case.body,
        case.theorem_name,
        budget_s,
        statement_check=check,
    )


def _judged(result: LeanResult) -> set[_Expect]:
    """What a self-test job's result shows (empty when Lean gave no answer to all of it)."""
    outcome = result.outcome
    if outcome is None or result.failure is not None:
        return set()
    if not outcome.complete:
        return {_Expect.NOT_COMPILED, _Expect.NOT_ACCEPTED}
    if result.statement_errors:
        return {_Expect.STATEMENT_REFUSED, _Expect.NOT_ACCEPTED}
    return {_Expect.ACCEPTED} if result.axioms is not None else set()


def self_test(backend: LeanBackend, budget_s: float, header: str) -> CheckOutcome:
    """A known-good proof must be complete with the standard axioms; a known-bad one must fail;
    a preamble problem's proof must pass its statement check, and a theorem of another statement
    under its name must fail it; a statement relying on an auto-bound implicit, and one under
    section variables, must pass their checks with honest proofs, and a proof that uses a
    variable its statement does not mention must not be accepted.

    A verifier that fails this is a broken instrument, not a judge of proofs. The statement
    checks are the ones problems get (`statement_check_command`), run on the real REPL under
    the pinned Lean's rules before any proof is judged by them.

    `header`: the batch's (`batch_header`). Every worker warms with it, all at once, and the
    self-test runs in that env, so the batch starts warm and each worker imports it once.
    """
    jobs = [_self_test_job(case, budget_s, header) for case in _SELF_TEST_CASES]
    backend.warm(header)
    results = {result.key[1]: result for result in backend.run(jobs)}
    warmed = backend.memory_report()  # what the cap must allow, measured on this workspace
    verdicts = []
    for case in _SELF_TEST_CASES:
        held = case.expect in _judged(results[case.key])
        verdicts.append((case, held))
    return CheckOutcome(
        all(held for _, held in verdicts),
        ", ".join(
            f"{case.what} {case.expect.value if held else 'NOT ' + case.expect.value}"
            for case, held in verdicts
        ),
        {
            case.key: {
                "held": held,
                "failure": results[case.key].failure,
                "axioms": list(results[case.key].axioms or ()),
                "statement_errors": [dict(e) for e in results[case.key].statement_errors or ()],
            }
            for case, held in verdicts
        }
        | {"warmed_repl_memory": warmed},
    )
