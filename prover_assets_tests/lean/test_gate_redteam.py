"""The red team (`redteam.py`): every complete candidate gets its hand-written decision from
the product's verifier, and what reaches Lean is the byte-exact text of Goedel's protocol."""

import pytest

from prover_assets.lean.gate_data import RUNNERS
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets.verify.worker import LeanJob
from prover_assets_tests.factories import make_generation, make_problem
from prover_assets_tests.goedel_oracle import goedel_body
from prover_assets_tests.lean_double import double_backend
from prover_assets_tests.redteam import CASES, LEAN, PLAIN, SIGNATURE


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    with double_backend(tmp_path_factory.mktemp("redteam"), workers=1) as backend:
        yield StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))


def test_the_red_team_has_at_least_sixty_cases_with_distinct_names():
    assert len(CASES) >= 60
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_red_team_candidate_gets_its_decision(verifier, case):
    generation = make_generation(completion_text=f"plan\n```lean4\n{case.block}\n```")
    decided = verifier.prepare(make_problem(statement=case.statement), generation)
    if case.decision == LEAN:
        assert isinstance(decided, LeanJob), (decided.stage, decided.reasons, case.why)
        assert decided.body == goedel_body(case.statement, generation.lean_code)
    else:
        assert not isinstance(decided, LeanJob), case.why
        assert decided.stage.value == case.decision, decided.reasons
        assert set(case.reasons) <= set(decided.reasons), (decided.reasons, case.why)


# Pieces an attacker mixes: comment and literal syntax, option lines, and words that must never
# reach Lean hidden in them.
FRAGMENTS = [
    "-- note",
    "/- note -/",
    "/- a /- b -/ c -/",
    "/- a -/",
    "/-- doc -/",
    "/-",
    "-/",
    "--",
    '"abc"',
    '"a -- b"',
    '"/- x"',
    '"',
    'r"raw"',
    'r#"a -- b"#',
    "'a'",
    "'-'",
    "«h x»",
    "«a--b»",
    "h₀",
    "x",
    "-",
    "(",
    ")",
    "positivity",
    "nlinarith [sq_nonneg x]",
    "set_option maxHeartbeats 400000 in",
    "theorem",
    ":= by",
    "sorry",
    "run_tac",
    "native_decide",
]
SEPARATORS = ["", " ", "\n  ", "\n"]
HIDDEN = frozenset({"sorry", "run_tac", "native_decide"})


def _candidates():
    from hypothesis import strategies as st

    piece = st.tuples(st.sampled_from(SEPARATORS), st.sampled_from(FRAGMENTS))
    return st.lists(piece, min_size=1, max_size=12).map(
        lambda pieces: GOEDEL_HEADER + SIGNATURE + "\n  " + "".join(s + f for s, f in pieces)
    )


def _without_options(tokens):
    """The texts of `tokens` less each `set_option <name> <value> [in]` (the compile view drops
    a whole line of one; the gate checks its option on both readings)."""
    texts = [t.text for t in tokens]
    kept, i = [], 0
    while i < len(texts):
        if texts[i] == "set_option" and i + 2 < len(texts):
            i += 4 if i + 3 < len(texts) and texts[i + 3] == "in" else 3
            continue
        kept.append(texts[i])
        i += 1
    return kept


def _readings(code):
    """(what the lexer reads after the displayed theorem's `:= by`, what Lean gets after the
    trusted `:= by`), or None when the candidate never reaches that point."""
    from prover_assets.lean.extract import ReinsertionError, lean_input
    from prover_assets.lean.lexer import LexError, code_tokens
    from prover_assets.lean.signature import first_theorem_signature

    try:
        displayed = code_tokens(code)
        compiled = code_tokens(lean_input(PLAIN, code).proof)
    except (LexError, ReinsertionError):
        return None
    signature = first_theorem_signature(displayed)
    return [t for t in displayed if t.start > signature.assign_start][1:], compiled


def test_without_a_differential_lean_compiles_exactly_the_code_the_gate_read():
    from hypothesis import HealthCheck, given, settings

    from prover_assets.lean.gate import static_check

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_candidates())
    def check(code):
        reasons = static_check(code, statement=PLAIN)
        readings = _readings(code)
        if readings is None or any(r.startswith(("protocol_differential", "lex")) for r in reasons):
            return
        displayed, compiled = readings
        assert _without_options(compiled) == _without_options(displayed), code

    check()


def test_no_text_the_gate_passes_carries_a_hidden_word_into_lean():
    from hypothesis import HealthCheck, given, settings

    from prover_assets.lean.gate import static_check

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_candidates())
    def check(code):
        readings = _readings(code)
        if readings is None or static_check(code, statement=PLAIN):
            return
        assert not HIDDEN & {t.text for t in readings[1]}, code

    check()


def test_each_runner_read_from_mathlibs_source_has_its_red_team_candidate():
    covered = {c.name.removeprefix("runner_") for c in CASES if c.family.startswith("runners")}
    assert covered == {runner.name for runner in RUNNERS}
