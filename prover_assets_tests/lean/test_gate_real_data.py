"""Every real proof in the shipped data reaches Lean as Goedel's protocol sends it.

The 100 Goedel-Prover proofs of the Kimina fixtures (and its two small controls), judged against
their statements by Goedel's own prompt rule, and every miniF2F and MOBench statement with its
`sorry` replaced by a tactic (synthetic proofs of real statements, preambles included): none is
refused before Lean, and the body each sends the REPL is byte-identical to the independent
oracle's (`goedel_oracle.py`). Where the pool sources hold a proof's statement, the derived
statement is the same statement. The real proofs stay unrefused with what issue 45 says Lean never
reads or cannot be harmed by: a `/-` no `-/` follows in a line comment, options in the
candidate's own header, allowed options in the proof. (`scripts/false_rejections.py` counts the
same over every source of the shared data.)
"""

import json
from pathlib import Path

import pytest

from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.statements import normalise_statement, statement_sha
from prover_assets.problems.eval_sets import (
    goedel_prompt_statement,
    load_minif2f,
    load_mobench,
)
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets.verify.worker import LeanJob
from prover_assets_tests.factories import make_generation, make_problem
from prover_assets_tests.goedel_oracle import goedel_body
from prover_assets_tests.lean_double import double_backend

DATA = Path(__file__).parents[1] / "data"
PROOFS = sorted((DATA / "repl-fixtures/kimina-lean-server/input").glob("*.lean"))
EVAL = Path(__file__).parents[2] / "prover_assets/data/goedel-prover-v2"


def _pool_statements() -> dict[str, str]:
    statements = {}
    for path in sorted((DATA / "pool-sources").glob("leanworkbook_*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            statements.setdefault(row["name"], row["formal_statement"])
    return statements


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    with double_backend(tmp_path_factory.mktemp("real"), workers=1) as backend:
        yield StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))


def _refused_or_changed(verifier, problems_and_blocks):
    """The names refused before Lean (with why) or sent other bytes than Goedel's protocol."""
    wrong = {}
    for problem, block in problems_and_blocks:
        # The code as extraction makes it (one MOBench docstring holds a ``` fence of its own).
        generation = make_generation(problem.problem_id, lean_code=GOEDEL_HEADER + block)
        decided = verifier.prepare(problem, generation)
        if not isinstance(decided, LeanJob):
            wrong[problem.problem_id] = decided.reasons
        elif decided.body != goedel_body(problem.formal_statement, generation.lean_code):
            wrong[problem.problem_id] = "bytes differ from Goedel's"
    return wrong


def _proof_problems():
    for path in PROOFS:
        code = path.read_text(encoding="utf-8")
        yield make_problem(path.stem, statement=goedel_prompt_statement(code)), code


def test_the_real_proofs_are_one_hundred_and_two():
    assert len(PROOFS) == 102


def test_every_real_proof_reaches_lean_with_goedels_bytes(verifier):
    assert _refused_or_changed(verifier, _proof_problems()) == {}


def test_the_derived_statements_are_the_pools_where_the_pool_has_them():
    pool = _pool_statements()
    compared = 0
    for problem, _ in _proof_problems():
        name = problem.problem_id.removeprefix("goedel-")
        if name in pool:
            compared += 1
            assert statement_sha(pool[name] + " sorry") == problem.statement_sha, name
    assert compared == 39


# Honest additions to a real proof (issue 45), each of which the gate refused before.
HONEST_VARIANTS = {
    # Last in the text: no `-/` follows the `/-`, so the regex removes nothing.
    "line_comment_with_an_opener": lambda code: code + "\n  -- divide by (-20)/-10",
    "allowed_options_in_the_proof": lambda code: code.replace(
        ":= by\n",
        ":= by\n  set_option synthInstance.maxHeartbeats 400000 in\n"
        "  set_option linter.unusedVariables false in\n",
        1,
    ),
    "options_in_the_own_header": lambda code: code.replace(
        "import Mathlib\n",
        "import Mathlib\nset_option pp.all true\nset_option trace.Meta true\n",
        1,
    ),
}


@pytest.mark.parametrize("variant", sorted(HONEST_VARIANTS))
def test_every_real_proof_with_an_honest_addition_still_reaches_lean(verifier, variant):
    originals = list(_proof_problems())
    changed = [(problem, HONEST_VARIANTS[variant](code)) for problem, code in originals]
    assert all(new != old for (_, new), (_, old) in zip(changed, originals, strict=True))
    assert _refused_or_changed(verifier, changed) == {}


def test_every_lean_workbook_test_statement_with_its_own_header_reaches_lean(verifier):
    # Their headers set `maxRecDepth` before the theorem: the candidate's header is not judged.
    rows = (DATA / "pool-sources/leanworkbook_test.jsonl").read_text(encoding="utf-8")
    problems = []
    for line in rows.splitlines():
        row = json.loads(line)
        statement = normalise_statement(row["formal_statement"] + " sorry")
        problems.append(make_problem(row["name"], statement=statement))
    assert len(problems) == 434
    assert all("set_option maxRecDepth" in p.formal_statement for p in problems)
    assert _refused_or_changed(verifier, map(_with_a_proof, problems)) == {}


def _with_a_proof(problem):
    return problem, problem.formal_statement.removesuffix("sorry") + "\n  norm_num"


def test_every_minif2f_statement_with_a_proof_reaches_lean_with_goedels_bytes(verifier):
    problems = load_minif2f(EVAL / "minif2f.jsonl")
    assert len(problems) == 244
    assert _refused_or_changed(verifier, map(_with_a_proof, problems)) == {}


@pytest.mark.slow  # more than 1.8 s on the 2-core machine
def test_every_mobench_statement_with_a_proof_reaches_lean_with_goedels_bytes(verifier):
    problems, _ = load_mobench(EVAL / "MOBench.jsonl")
    assert len(problems) == 359
    assert _refused_or_changed(verifier, map(_with_a_proof, problems)) == {}
