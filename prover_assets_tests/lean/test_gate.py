"""The static gate: every lexically catchable cheat of LEAN_VERIFIER.md section 3, and controls."""

import pytest

from prover_assets.lean.gate import static_check
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets_tests.factories import PREAMBLE, PREAMBLE_STATEMENT, preamble_code

STATEMENT = GOEDEL_HEADER + "theorem t (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2 := by sorry"
SIGNATURE = "theorem t (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2 := by"


def code(proof: str, before: str = "", after: str = "") -> str:
    return GOEDEL_HEADER + before + SIGNATURE + "\n" + proof + "\n" + after


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (code("  sorry"), "banned:sorry"),
        (code("  admit"), "banned:admit"),
        (code("  exact sorryAx _ true"), "banned:sorryAx"),
        (
            code("  cheat", before='macro "cheat" : tactic => `(tactic| exact sorryAx _ true)\n'),
            "banned:macro",
        ),
        (code("  apply?"), "banned:apply?"),
        (code("  exact?"), "banned:exact?"),
        (code("  native_decide"), "banned:native_decide"),
        (code("  decide +native"), "banned:native_decide"),
        (code("  exact h", before="axiom h : 0 < (2 : ℝ)\n"), "banned:axiom"),
        (code("  exact f", before="opaque f : 0 < (2 : ℝ)\n"), "banned:opaque"),
        (code("  exact unsafeCast ()"), "banned:unsafeCast"),
        (code("  rfl", before="unsafe def g : ℕ := 0\n"), "banned:unsafe"),
        (code("  rfl", before="@[implemented_by g] def f : ℕ := 0\n"), "banned:implemented_by"),
        (code("  rfl", before='@[extern "c_f"] def f : ℕ := 0\n'), "banned:extern"),
        (
            code(
                "  positivity",
                before="lemma h : True := trivial\nset_option debug.skipKernelTC true\n",
            ),
            "banned:set_option:debug.skipKernelTC",
        ),
        (
            code("  set_option debug.skipKernelTC true in\n  positivity"),
            "banned:set_option:debug.skipKernelTC",
        ),
        (code("  positivity", before='elab "cheat" : tactic => pure ()\n'), "banned:elab"),
        (code("  run_tac pure ()"), "banned:run_tac"),
        (code("  positivity", after="run_cmd pure ()"), "banned:run_cmd"),
        (code("  positivity", after="run_elab pure ()"), "banned:run_elab"),
        (code("  exact Lean.ofReduceBool _ _ rfl"), "banned:Lean.ofReduceBool"),
        (code("  exact Lean.trustCompiler"), "banned:Lean.trustCompiler"),
        (code("  open private foo in\n  positivity"), "banned:open_private"),
        (code("  positivity", before="#eval Lean.modifyEnv id\n"), "banned:#eval"),
        (code("  positivity", after="#exit"), "banned:#exit"),
        (code("  positivity", after="#print axioms t"), "banned:#print"),
        (code("  positivity", before="instance : Inhabited ℝ := ⟨1⟩\n"), "banned:instance"),
        (code("  positivity", before='notation "𝟚" => (2 : ℝ)\n'), "banned:notation"),
        (
            code("  positivity", before="macro_rules | `(tactic| trivial) => `(tactic| sorry)\n"),
            "banned:macro_rules",
        ),
        (code("  positivity", before='syntax "cheat" : tactic\n'), "banned:syntax"),
        (code("  positivity", before="open Real in\n"), "banned:open_in"),
        ("prelude\n" + code("  positivity"), "banned:prelude"),
        (code("  positivity", after="import Mathlib.Tactic"), "banned:import"),
        (
            code("  positivity", after="theorem extra : False := by positivity"),
            "banned:decl:theorem",
        ),
        (code("  positivity", after="lemma extra : True := trivial"), "banned:decl:lemma"),
        (code("  positivity", after="def extra : ℕ := 1"), "banned:decl:def"),
        (code("  positivity", after="instance : Inhabited ℕ := ⟨1⟩"), "banned:decl:instance"),
        (code("  positivity", after="abbrev extra : ℕ := 1"), "banned:decl:abbrev"),
        (code("  positivity", after="structure S where"), "banned:decl:structure"),
        (code("  positivity", after="class C where"), "banned:decl:class"),
        (code("  positivity", after="inductive I where"), "banned:decl:inductive"),
        (code("  positivity", after="attribute [simp] t"), "banned:decl:attribute"),
        (
            code("  positivity", after="@[simp] theorem x : True := trivial"),
            "banned:decl:attribute",
        ),
        (
            code("  exact Lean.Elab.Command.elabCommand default"),
            "banned:Lean.Elab.Command.elabCommand",
        ),
        (code("  positivity", before="def f := Lean.modifyEnv\n"), "banned:Lean.modifyEnv"),
    ],
)
def test_each_lexical_cheat_is_caught(source, reason):
    assert reason in static_check(source)


def test_changed_statement_is_caught_with_the_problem():
    weaker = GOEDEL_HEADER + "theorem t (x : ℝ) (h₀ : 0 < x) : 0 ≤ x ^ 2 := by\n  positivity"
    assert static_check(weaker, statement=STATEMENT) == ["statement_mismatch"]


def test_other_theorem_name_with_same_signature_is_renamed_not_mismatched():
    renamed = code("  positivity").replace("theorem t ", "theorem t_disproof ")
    assert static_check(renamed, statement=STATEMENT) == ["theorem_renamed"]


SHADOWING_SQRT = "noncomputable def Real.sqrt (x : ℝ) : ℝ := 4\nnamespace Evil\n"


@pytest.mark.parametrize(
    ("before", "after", "reasons"),
    [
        (SHADOWING_SQRT, "end Evil", ["banned:scope:end", "banned:scope:namespace"]),
        ("variable (hF : False)\n", "", ["banned:scope:variable"]),
        ("section\nvariable (hF : False)\n", "", ["banned:scope:section", "banned:scope:variable"]),
        ("namespace Evil\nend Evil\n", "", ["banned:scope:end", "banned:scope:namespace"]),
        ("include h₀\n", "", ["banned:scope:include"]),
        ("omit h₀\n", "", ["banned:scope:omit"]),
        ("universe u\n", "", ["banned:scope:universe"]),
        ("export Real (sqrt)\n", "", ["banned:scope:export"]),
        ("attribute [-simp] pow_two\n", "", ["banned:scope:attribute"]),
        ("lemma helper : (0 : ℝ) < 1 := one_pos\nopen Real\n", "", ["banned:scope:open"]),
        ("def _root_.Real.pi : ℝ := 3\n", "", ["banned:scope:_root_"]),
    ],
    ids=[
        "namespace_wrap_after_shadowing_def",
        "variable_false",
        "section_variable",
        "namespace_closed_early",
        "include",
        "omit",
        "universe",
        "export",
        "attribute",
        "open_after_header",
        "root_name",
    ],
)
def test_scope_changing_commands_the_statement_lacks_are_banned(before, after, reasons):
    got = static_check(code("  positivity", before=before, after=after), statement=STATEMENT)
    assert [r for r in got if r.startswith("banned:scope:")] == reasons


def test_scope_commands_the_trusted_statement_has_may_be_repeated():
    statement = GOEDEL_HEADER + "variable (y : ℝ)\n" + SIGNATURE + " sorry"
    candidate = code("  positivity", before="variable (y : ℝ)\n")
    assert static_check(candidate, statement=statement) == []
    assert static_check(
        code("  positivity", before="variable (y : ℝ)\nvariable (hF : False)\n"),
        statement=statement,
    ) == ["dropped_by_reinsertion:variable", "banned:scope:variable"]


def test_a_proof_that_names_root_is_banned_as_scope_even_inside_tactics():
    assert "banned:scope:_root_" in static_check(code("  exact _root_.sq_pos_of_pos h₀"))


def test_import_in_header_not_in_problem_header_is_header_mismatch():
    source = "import Mathlib\nimport MyCheats\n" + code("  positivity")
    assert "header_mismatch" in static_check(source, statement=STATEMENT)


def test_code_without_theorem_is_rejected():
    assert static_check(GOEDEL_HEADER + "example : True := trivial") == ["no_theorem"]


def test_unterminated_comment_is_a_lex_error():
    assert static_check(code("  positivity /- open")) == ["lex_error"]


@pytest.mark.parametrize(
    "source",
    [
        code("  -- we could use sorry here\n  positivity"),
        code('  have : "sorry" = "sorry" := rfl\n  positivity'),
        code("  have sorry_free : 0 < x := h₀\n  positivity"),
        code("  have h_admit : 0 < x := h₀\n  nlinarith [h_admit]"),
        code("  decide"),
        code("  set_option maxHeartbeats 400000 in\n  positivity"),
        code("  set_option maxRecDepth 10000 in\n  nlinarith [sq_nonneg x]"),
        "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"
        + SIGNATURE
        + "\n  positivity",
    ],
    ids=[
        "line_comment",
        "string",
        "identifier_sorry_free",
        "identifier_h_admit",
        "decide",
        "maxHeartbeats_in",
        "maxRecDepth_in",
        "model_header",
    ],
)
def test_controls_pass(source):
    assert static_check(source, statement=STATEMENT) == []


def test_a_nested_comment_is_refused_and_what_the_regex_leaves_of_it_is_judged_as_lean_gets_it():
    # Lean reads one comment; Goedel's non-greedy regex ends it at the first `-/`, so Lean
    # would compile ` admit -/`: the differential is named, and so is the word Lean would run.
    nested = code("  /- sorry /- nested sorry -/ admit -/\n  positivity")
    assert static_check(nested, statement=STATEMENT) == [
        "protocol_differential:nested_comment",
        "protocol_differential:comment_removal",
        "banned:admit",
    ]


def test_a_helper_lemma_before_the_theorem_is_refused_as_dropped_by_reinsertion():
    # Goedel's problem_check keeps only the text after the first `theorem ... := by`.
    helper = code("  positivity", before="lemma helper (y : ℝ) : 0 ≤ y ^ 2 := by positivity\n")
    assert static_check(helper, statement=STATEMENT) == ["dropped_by_reinsertion:lemma"]


@pytest.mark.parametrize(
    ("source", "reasons"),
    [
        (
            code("  positivity", before="lemma helper : True := trivial\nopen Real Nat in\n"),
            ["banned:open_in", "dropped_by_reinsertion:lemma", "banned:scope:open"],
        ),
        (
            code("  positivity", before="lemma helper : True := trivial\nopen Real in\n"),
            ["banned:open_in", "dropped_by_reinsertion:lemma", "banned:scope:open"],
        ),
        (
            code("  positivity", before="lemma helper : True := trivial\nopen Real Nat\n"),
            ["dropped_by_reinsertion:lemma", "banned:scope:open"],
        ),
        (
            GOEDEL_HEADER + "lemma helper : True := trivial\nopen Real",
            ["banned:scope:open", "no_theorem"],
        ),
    ],
    ids=["open_two_in", "open_one_in", "open_without_in", "open_at_the_end"],
)
def test_an_open_in_after_the_header_is_banned_and_a_plain_open_is_a_scope_change(source, reasons):
    assert static_check(source) == reasons


@pytest.mark.parametrize(
    ("source", "reasons"),
    [
        (GOEDEL_HEADER + "open", ["no_theorem"]),
        (
            code("  positivity", after="set_option"),
            [
                "banned:set_option:",
                "banned:after_proof:set_option",
                "protocol_differential:dropped_line",
            ],
        ),
        (code("  simp [native]"), []),
        (
            code("  positivity", before="lemma helper : True := trivial\nopen private foo in\n"),
            ["banned:open_private", "dropped_by_reinsertion:lemma", "banned:scope:open"],
        ),
        (
            code("  positivity", before="lemma helper : (1 : ℕ) = 1 := (rfl)\nopen Real in\n"),
            ["banned:open_in", "dropped_by_reinsertion:lemma", "banned:scope:open"],
        ),
        (code("  exact Foo.sorryAx _ true"), ["banned:Foo.sorryAx"]),
        (code("  exact Foo.unsafeCast ()"), ["banned:Foo.unsafeCast"]),
    ],
    ids=[
        "header_ends_in_open",
        "file_ends_in_set_option",
        "native_as_a_lemma_name",
        "open_private_after_the_header",
        "open_in_after_a_bracket",
        "banned_word_in_a_namespace",
        "unsafe_word_in_a_namespace",
    ],
)
def test_edge_cases_of_the_token_scan(source, reasons):
    assert static_check(source) == reasons


def test_a_root_name_beyond_the_statements_own_is_a_scope_change():
    statement = STATEMENT.replace("0 < x ^ 2", "0 < x ^ 2 + _root_.Real.pi")
    candidate = statement.replace(":= by sorry", ":= by\n  positivity")
    assert static_check(candidate, statement=statement) == []
    extra = candidate.replace("theorem t", "def _root_.Foo : ℕ := 1\ntheorem t")
    assert static_check(extra, statement=statement) == [
        "dropped_by_reinsertion:def",
        "banned:scope:_root_",
    ]


# The trusted preamble (issue: MOBench whole): a candidate must repeat it token for token.
TAMPERED = [
    ("9 * Real.sqrt 2 / 32", "9 * Real.sqrt 2 / 31", "expected `32`, found `31` at line 9"),
    ("x ^ 2 + 1", "x ^ 2 + 2", "expected `1`, found `2` at line 11"),
    ("def f (x : ℝ) : ℝ := x ^ 2 + 1\n\n", "", "expected `def`, found `instance` at line 11"),
    ("solution : ℝ", "answer : ℝ", "expected `solution`, found `answer` at line 9"),
    (
        "noncomputable abbrev",
        "@[simp] noncomputable abbrev",
        "expected `noncomputable`, found `@[`",
    ),
    ("namespace Geo\n\n", "", "expected `namespace`, found `theorem`"),
]


@pytest.mark.parametrize(
    ("trusted", "changed", "where"),
    TAMPERED,
    ids=[
        "numeral",
        "definition_body",
        "dropped",
        "renamed",
        "attribute_added",
        "namespace_dropped",
    ],
)
def test_a_tampered_preamble_is_a_preamble_mismatch_naming_the_first_differing_token(
    trusted, changed, where
):
    tampered = PREAMBLE.replace(trusted, changed, 1)
    assert tampered != PREAMBLE
    reasons = static_check(preamble_code(preamble=tampered), statement=PREAMBLE_STATEMENT)
    assert reasons[0].startswith(f"preamble_mismatch:{where}")
    assert [r for r in reasons if r.startswith("preamble_mismatch")] == reasons[:1]


def test_reordered_preamble_declarations_are_a_mismatch():
    definition = "def f (x : ℝ) : ℝ := x ^ 2 + 1\n\n"
    answer = "noncomputable abbrev solution : ℝ := 9 * Real.sqrt 2 / 32\n\n"
    reordered = PREAMBLE.replace(answer, "").replace(definition, definition + answer)
    reasons = static_check(preamble_code(preamble=reordered), statement=PREAMBLE_STATEMENT)
    assert reasons[0].startswith("preamble_mismatch:expected `noncomputable`, found `def`")


def test_the_honest_candidate_repeating_the_preamble_passes_its_instance_and_namespace_included():
    assert static_check(preamble_code(), statement=PREAMBLE_STATEMENT) == []


def test_comments_and_layout_in_the_preamble_do_not_count():
    relaid = PREAMBLE.replace("/-- The answer. -/", "/-- The answer, in closed form. -/").replace(
        "x ^ 2 + 1", "x ^ 2 +  -- plus one\n    1"
    )
    assert static_check(preamble_code(preamble=relaid), statement=PREAMBLE_STATEMENT) == []


@pytest.mark.parametrize(
    ("added", "reason"),
    [
        ("instance : Inhabited ℝ := ⟨solution⟩\n", "banned:instance"),
        ('notation "𝕊" => solution\n', "banned:notation"),
        ("end Geo\n", "banned:scope:end"),
        ("variable (hF : False)\n", "banned:scope:variable"),
        ("attribute [simp] f\n", "banned:scope:attribute"),
        (
            "noncomputable def Real.sqrt (x : ℝ) : ℝ := 4\nnamespace Evil\n",
            "banned:scope:namespace",
        ),
    ],
    ids=[
        "instance",
        "notation",
        "namespace_closed_early",
        "variable",
        "attribute",
        "evil_namespace",
    ],
)
def test_what_a_candidate_adds_after_the_preamble_is_held_to_the_bans(added, reason):
    reasons = static_check(preamble_code(before_theorem=added), statement=PREAMBLE_STATEMENT)
    assert reason in reasons
    assert not any(r.startswith("preamble_mismatch") for r in reasons)


def test_a_fully_proven_helper_lemma_after_the_preamble_is_dropped_by_reinsertion():
    helper = "lemma f_pos (x : ℝ) : 0 < f x := by\n  unfold f\n  positivity\n\n"
    code = preamble_code("  exact f_pos x", before_theorem=helper)
    assert static_check(code, statement=PREAMBLE_STATEMENT) == ["dropped_by_reinsertion:lemma"]


def test_the_preambles_banned_words_are_trusted_only_where_the_statement_has_them():
    # Without the statement, the copied `instance` is just a banned word.
    assert "banned:instance" in static_check(preamble_code())


def test_a_candidate_that_stops_inside_the_preamble_is_told_where_it_ended():
    truncated = GOEDEL_HEADER + PREAMBLE.split("def f")[0]
    reasons = static_check(truncated, statement=PREAMBLE_STATEMENT)
    assert reasons[0] == "preamble_mismatch:expected `def`, found the end of the code"
    assert reasons[-1] == "no_theorem"


def test_the_protocols_own_imports_are_allowed_whatever_the_problems_header():
    # Extraction puts GOEDEL_HEADER (with `import Aesop`) before every block.
    statement = "import Mathlib\n\n" + SIGNATURE + " sorry"
    assert static_check(code("  positivity"), statement=statement) == []
    cheat = "import Mathlib\nimport MyCheats\n" + code("  positivity")
    assert static_check(cheat, statement=statement) == ["header_mismatch"]


@pytest.mark.parametrize(
    ("proof", "reason"),
    [
        ("  exact «Lean».«addDecl» default", "banned:«Lean».«addDecl»"),
        ("  exact Lean.«addDecl» default", "banned:Lean.«addDecl»"),
        ("  exact «sorryAx» _ true", "banned:«sorryAx»"),
        ("  exact _root_.Lean.trustCompiler", "banned:_root_.Lean.trustCompiler"),
        ("  exact Foo.«unsafeCast» ()", "banned:Foo.«unsafeCast»"),
    ],
    ids=["both_quoted", "one_quoted", "quoted_word", "rooted", "quoted_unsafe"],
)
def test_names_are_compared_as_lean_reads_them_without_guillemets(proof, reason):
    assert reason in static_check(code(proof), statement=STATEMENT)


def test_a_quoted_a_dot_b_is_one_component_not_the_meta_namespace():
    assert (
        static_check(code("  have «Lean.x» : 0 < x := h₀\n  positivity"), statement=STATEMENT) == []
    )


def test_a_theorem_named_in_guillemets_is_not_renamed():
    quoted = code("  positivity").replace("theorem t ", "theorem «t» ")
    assert static_check(quoted, statement=STATEMENT) == []


@pytest.mark.parametrize(
    ("before_theorem", "reasons"),
    [
        ("set_option maxHeartbeats 400000 in\n", []),
        ("set_option maxHeartbeats 400000\n", []),
        ("set_option maxHeartbeats 400000 in\nlemma h : True := trivial\n", ["lemma"]),
        ("set_option maxHeartbeats 400000\nlemma h : True := trivial\n", ["lemma"]),
        ("set_option maxHeartbeats 400000 in\n@[simp] lemma h : True := trivial\n", ["@["]),
    ],
    ids=["option_in", "option", "option_in_then_helper", "option_then_helper", "attribute"],
)
def test_after_a_preamble_only_allowed_options_stand_before_the_theorem(before_theorem, reasons):
    candidate = preamble_code(before_theorem=before_theorem)
    assert static_check(candidate, statement=PREAMBLE_STATEMENT) == [
        f"dropped_by_reinsertion:{r}" for r in reasons
    ]


@pytest.mark.parametrize(
    ("source", "reasons"),
    [
        (GOEDEL_HEADER + "set_option maxHeartbeats 400000 in\n" + SIGNATURE + "\n  positivity", []),
        (
            GOEDEL_HEADER
            + "set_option maxHeartbeats 400000 in\nlemma h : True := trivial\n"
            + SIGNATURE
            + "\n  positivity",
            ["dropped_by_reinsertion:lemma"],
        ),
        (GOEDEL_HEADER + "set_option maxHeartbeats 400000", ["no_theorem"]),
        (
            "lemma h : True := trivial\n" + SIGNATURE + "\n  positivity",
            ["dropped_by_reinsertion:lemma"],
        ),
        (GOEDEL_HEADER + "open Real in\n" + SIGNATURE + "\n  positivity", ["banned:open_in"]),
    ],
    ids=[
        "header_option_in",
        "header_option_in_then_helper",
        "header_ends_in_an_option",
        "no_header",
        "header_open_in",
    ],
)
def test_what_stands_between_the_header_and_the_theorem(source, reasons):
    assert static_check(source, statement=STATEMENT) == reasons


@pytest.mark.parametrize(
    "header",
    [
        "open sorryAx BigOperators Real Nat Topology Rat",
        "open Lean Elab BigOperators Real Nat Topology Rat",
        "set_option debug.skipKernelTC true\nopen BigOperators Real Nat Topology Rat",
        "set_option synthInstance.maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat",
        "set_option pp.all true\nopen BigOperators Real Nat Topology Rat",
    ],
    ids=["opens_a_word", "opens_the_meta_api", "kernel_off", "synth", "pp_all"],
)
def test_the_candidates_own_header_is_not_judged(header):
    # Re-insertion drops the candidate's header and Lean compiles the trusted one: nothing in it
    # reaches Lean, so nothing in it can serve the proof (issue 45).
    source = code("  positivity").replace("open BigOperators Real Nat Topology Rat", header)
    assert static_check(source, statement=STATEMENT) == []


def test_a_meta_name_the_header_opened_is_still_judged_where_the_proof_uses_it():
    # Lean never opens `Lean` for the proof (the trusted header does not); the proof's own
    # names are held to the bans as written.
    source = code("  exact Lean.Elab.admitGoal").replace(
        "open BigOperators", "open Lean BigOperators"
    )
    assert static_check(source, statement=STATEMENT) == ["banned:Lean.Elab.admitGoal"]


def test_a_tampered_preamble_is_only_a_preamble_mismatch_not_a_dropped_text():
    tampered = PREAMBLE.replace("9 * Real.sqrt 2 / 32", "9 * Real.sqrt 2 / 31")
    reasons = static_check(preamble_code(preamble=tampered), statement=PREAMBLE_STATEMENT)
    # From the first differing token on, the copy is the candidate's own and held to the bans.
    assert reasons == [
        "preamble_mismatch:expected `32`, found `31` at line 9",
        "banned:instance",
        "banned:scope:namespace",
    ]


def test_a_proof_lean_would_get_cut_open_is_named_by_each_reading():
    # `--` in a string: the regex cuts the line, so the text Lean gets does not even lex.
    cut = code('  have : "a--b" = "a--b" := rfl\n  positivity')
    assert static_check(cut, statement=STATEMENT) == [
        "protocol_differential:comment_marker_in_string",
        "protocol_differential:comment_removal",
        "protocol_differential:compiled_text",
    ]


def test_a_declaration_only_lean_would_get_is_named_by_the_compiled_reading():
    # To the lexer one nested comment; after the regex, Lean gets a second theorem.
    hidden = code("  /- /- -/\ntheorem evil : 1 = 1 := rfl\n-/\n  positivity")
    assert static_check(hidden, statement=STATEMENT) == [
        "protocol_differential:nested_comment",
        "protocol_differential:comment_removal",
        "banned:decl:theorem",
        "banned:unindented_proof",
    ]


def test_an_option_that_ends_the_text_before_any_theorem_is_no_theorem():
    source = GOEDEL_HEADER + "lemma h : True := trivial\nset_option maxHeartbeats 1"
    assert static_check(source, statement=STATEMENT) == ["no_theorem"]


def test_a_scope_change_only_lean_would_get_is_named_by_the_compiled_reading():
    hidden = code("  /- /- -/\nend\nnamespace Evil\n-/\n  positivity")
    assert static_check(hidden, statement=STATEMENT) == [
        "protocol_differential:nested_comment",
        "protocol_differential:comment_removal",
        "banned:decl:namespace",
        "banned:unindented_proof",
        "banned:scope:end",
        "banned:scope:namespace",
    ]


def test_a_proof_may_name_root_once_in_neither_reading_even_where_the_statement_does():
    statement = STATEMENT.replace("0 < x ^ 2", "0 < x ^ 2 + _root_.Real.pi")
    proof = statement.replace(":= by sorry", ":= by\n  exact _root_.foo")
    assert static_check(proof, statement=statement) == ["banned:scope:_root_"]


@pytest.mark.parametrize(
    ("proof", "reasons"),
    [
        ("  have : 2 ^ 10 = eval% 2 ^ 10 := rfl\n  positivity", ["banned:eval%"]),
        ("  have : 2 ^ 10 = eval % 2 := rfl\n  positivity", []),
        ("  have := Polynomial.eval x 0\n  positivity", []),
        ("  have : 7 % 2 = 1 := rfl\n  positivity", []),
    ],
    ids=["eval_percent", "eval_then_a_spaced_percent", "polynomial_eval", "a_modulo"],
)
def test_mathlibs_eval_percent_is_refused_and_eval_alone_is_not(proof, reasons):
    assert static_check(code(proof), statement=STATEMENT) == reasons


def test_eval_percent_is_refused_even_as_the_texts_first_tokens():
    assert "banned:eval%" in static_check("eval% 1")


# A command needs no new line after the proof: the block ends at the keyword, on its line. These
# words were in no word list: only the command keywords of the pinned Mathlib refuse them.
@pytest.mark.parametrize(
    ("source", "reasons"),
    [
        (
            "theorem t : True := by\n  skip compile_inductive% Nat",
            ["banned:after_proof:compile_inductive%"],
        ),
        (
            'theorem t : True := by\n  trace "a\n"assert_not_exists Foo',
            ["banned:after_proof:assert_not_exists"],
        ),
        (
            'theorem t : True := by\n  skip library_note "x" /-- y -/',
            ["banned:after_proof:library_note"],
        ),
        (
            'theorem t : True := by\n  trace "a\n"library_note "x" /-- y -/',
            ["banned:after_proof:library_note"],
        ),
        (
            "theorem t : True := by\n  skip assert_not_exists Foo",
            ["banned:after_proof:assert_not_exists"],
        ),
        (
            'theorem t : True := by\n  trace "a\n"compile_inductive% Nat',
            ["banned:after_proof:compile_inductive%"],
        ),
    ],
    ids=[
        "percent_command_after_a_tactic",
        "after_a_multiline_string",
        "library_note_after_a_tactic",
        "library_note_after_a_string",
        "assert_not_exists_after_a_tactic",
        "percent_command_after_a_string",
    ],
)
def test_a_command_on_the_proofs_line_is_refused_by_its_keyword(source, reasons):
    assert static_check(source) == reasons


@pytest.mark.parametrize(
    ("proof", "reasons"),
    [
        ("  positivity compile_inductive% List", ["banned:after_proof:compile_inductive%"]),
        (
            "  positivity lemma u : True := trivial",
            ["banned:decl:lemma", "banned:after_proof:lemma"],
        ),
        ("  open Real in\n  positivity", []),
        ("  set_option maxHeartbeats 400000 in\n  positivity", []),
        ("  count_heartbeats in\n  positivity", []),
        ("  have lemma_1 : 0 < x := h₀\n  exact pow_pos lemma_1 2", []),
        ('  have : "library_note" = "library_note" := rfl\n  positivity', []),
    ],
    ids=[
        "compiled_reading_too",
        "a_declaration_word_and_its_place",
        "open_in",
        "allowed_option_in",
        "count_heartbeats_tactic",
        "keyword_inside_a_name",
        "keyword_in_a_string",
    ],
)
def test_command_keywords_with_the_problems_statement(proof, reasons):
    assert static_check(code(proof), statement=STATEMENT) == reasons


@pytest.mark.parametrize("name", ["exampleX", "openX!", "variableXX?"])
def test_a_hypothesis_named_like_a_command_plus_letters_is_honest(name):
    """Only a `?` or `!` glued to a command word makes it one (`variable?`); other trailing
    characters make another identifier."""
    source = code(f"  have {name} : 0 < x := h₀\n  positivity")
    assert static_check(source, statement=STATEMENT) == []
