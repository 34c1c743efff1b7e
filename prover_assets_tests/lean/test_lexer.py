"""The Lean lexer: what is code, what is comment or string, and invariance under trivia."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prover_assets.lean.lexer import LexError, TokenKind, code_tokens, line_col, tokenize

MINIF2F = Path(__file__).parents[2] / "prover_assets/data/goedel-prover-v2/minif2f.jsonl"


def texts(source: str) -> list[str]:
    return [token.text for token in code_tokens(source)]


def test_nested_block_comments_are_one_comment():
    tokens = tokenize("a /- x /- y -/ z -/ b")
    assert [(t.kind, t.text) for t in tokens if t.kind != TokenKind.WHITESPACE] == [
        (TokenKind.IDENT, "a"),
        (TokenKind.BLOCK_COMMENT, "/- x /- y -/ z -/"),
        (TokenKind.IDENT, "b"),
    ]


def test_doc_and_module_comments_are_comments():
    assert texts("/-- doc sorry -/ theorem /-! module -/ x") == ["theorem", "x"]


def test_line_comment_runs_to_end_of_line():
    assert texts("a -- sorry here\nb") == ["a", "b"]


def test_string_with_escaped_quote_and_comment_marker_is_one_token():
    tokens = code_tokens('f "a \\" -- not a comment" g')
    assert [(t.kind, t.text) for t in tokens] == [
        (TokenKind.IDENT, "f"),
        (TokenKind.STRING, '"a \\" -- not a comment"'),
        (TokenKind.IDENT, "g"),
    ]


def test_raw_string_with_hashes():
    assert texts('x r#"a "quoted" sorry"# y') == ["x", 'r#"a "quoted" sorry"#', "y"]


def test_char_literals_including_escapes():
    tokens = code_tokens("'a' = '\\n' ∧ '\\'' = c")
    assert [t.text for t in tokens if t.kind is TokenKind.CHAR] == ["'a'", "'\\n'", "'\\''"]


def test_primes_stay_inside_identifiers():
    assert texts("cases' h with h' h''") == ["cases'", "h", "with", "h'", "h''"]


def test_guillemet_identifier_is_one_token():
    assert texts("«my theorem».aux x") == ["«my theorem».aux", "x"]


def test_unicode_identifiers_and_subscripts():
    assert texts("(h₀ : 0 < x) (hₐ : ℝ) (α β : Type)") == [
        "(",
        "h₀",
        ":",
        "0",
        "<",
        "x",
        ")",
        "(",
        "hₐ",
        ":",
        "ℝ",
        ")",
        "(",
        "α",
        "β",
        ":",
        "Type",
        ")",
    ]


def test_dotted_names_are_one_identifier_but_field_numbers_are_not():
    assert texts("Nat.succ_le_iff h.1 h.le") == ["Nat.succ_le_iff", "h", ".", "1", "h.le"]


def test_lambda_pi_sigma_are_symbols_not_identifiers():
    kinds = {t.text: t.kind for t in code_tokens("λ Π Σ π")}
    assert kinds == {
        "λ": TokenKind.SYMBOL,
        "Π": TokenKind.SYMBOL,
        "Σ": TokenKind.SYMBOL,
        "π": TokenKind.IDENT,
    }


def test_numerals():
    numbers = [
        t.text
        for t in code_tokens("0x1F 0b101 0o17 12 1.5 2.5e-3 1_000")
        if t.kind is TokenKind.NUMBER
    ]
    assert numbers == ["0x1F", "0b101", "0o17", "12", "1.5", "2.5e-3", "1_000"]


def test_multi_character_symbols_and_hash_commands():
    assert texts("x := y <;> z #eval #exit #[1]") == [
        "x",
        ":=",
        "y",
        "<;>",
        "z",
        "#eval",
        "#exit",
        "#[",
        "1",
        "]",
    ]


def test_question_mark_tactics_are_single_identifiers():
    assert texts("apply? exact? apply") == ["apply?", "exact?", "apply"]


@pytest.mark.parametrize("source", ['"never closed', "/- never closed", "/- a /- b -/", "«open"])
def test_unterminated_literals_and_comments_raise(source):
    with pytest.raises(LexError):
        tokenize(source)


def test_line_col_counts_like_the_repl():
    text = "ab\ncd\nef"
    assert line_col(text, 0) == (1, 0)
    assert line_col(text, 4) == (2, 1)
    assert line_col(text, 6) == (3, 0)


def test_offsets_reconstruct_the_source():
    source = 'theorem t (x : ℕ) : x = x := by\n  -- c\n  rfl /- d -/ "s"'
    assert "".join(token.text for token in tokenize(source)) == source


# --- property tests: trivia never changes the code tokens -----------------------------------

_IDENTS = st.sampled_from(["x", "h₀", "Nat.succ", "ha'", "«a b»", "ℝ", "sorry_free", "α"])
_OTHERS = st.sampled_from(
    ["(", ")", ":", ":=", "∀", ",", "+", "≤", "42", "1.5", '"str -- x"', "'c'", "by", "<;>"]
)
_TRIVIA = st.sampled_from(
    [
        " ",
        "\n",
        "\t",
        "  \n  ",
        " -- line comment\n",
        "/- block -/",
        "/- a /- nested -/ b -/",
        "/-- doc -/",
        "\n/-! module -/\n",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_IDENTS, _OTHERS), min_size=1, max_size=30), st.data())
def test_comments_and_whitespace_never_change_the_code_tokens(pieces, data):
    plain = " ".join(pieces)
    separators = [data.draw(_TRIVIA) for _ in pieces]
    decorated = "".join(
        piece + separator for piece, separator in zip(pieces, separators, strict=True)
    )
    assert texts(decorated) == texts(plain)


@pytest.fixture(scope="module")
def minif2f_codes():
    return [json.loads(line)["lean4_code"] for line in MINIF2F.read_text().splitlines()]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_real_statements_keep_their_tokens_when_respaced_and_commented(minif2f_codes, data):
    code = data.draw(st.sampled_from(minif2f_codes))
    tokens = code_tokens(code)
    rebuilt = "".join(token.text + data.draw(_TRIVIA) for token in tokens)
    assert [t.text for t in code_tokens(rebuilt)] == [t.text for t in tokens]
