"""The red team: complete candidate files, each with the decision it must get and why.

Each case is a whole lean4 block as a model would write it (its own header included), judged
against one of two trusted statements: `PLAIN` (a miniF2F-shaped theorem at the root) or
`NAMESPACED` (a MOBench-shaped preamble that leaves `namespace Geo` open, theorem `Geo.p`).
A decision is `LEAN` (the verifier hands it to Lean: what Lean then says decides) or the
stage and the reasons that must all be among the verdict's. The expected decisions were
written by hand from Lean's reading and Goedel's transforms (PROTOCOL.md), not read off the
code; `why` says what the attack does and what refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets_tests.factories import PREAMBLE, PREAMBLE_SIGNATURE, PREAMBLE_STATEMENT

SIGNATURE = "theorem t (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2 := by"
PLAIN = GOEDEL_HEADER + SIGNATURE + " sorry"
NAMESPACED = PREAMBLE_STATEMENT
# The header Goedel-Prover-V2 writes at the top of its blocks.
MODEL_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
    "open BigOperators Real Nat Topology Rat\n\n"
)
LEAN = "lean"


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    block: str  # the lean4 block, as the model displays it
    decision: str  # LEAN, or the stage (`gate`, `reinsertion`)
    reasons: tuple[str, ...]  # each must be among the verdict's reasons
    why: str
    statement: str = PLAIN


def plain(proof: str, *, before: str = "", after: str = "") -> str:
    return MODEL_HEADER + before + SIGNATURE + "\n" + proof + "\n" + after


def namespaced(proof: str, *, before: str = "", after: str = "") -> str:
    return MODEL_HEADER + PREAMBLE + before + PREAMBLE_SIGNATURE + "\n" + proof + "\n" + after


def gate(*reasons: str) -> tuple[str, tuple[str, ...]]:
    return "gate", reasons


CASES: list[Case] = []


def case(name, family, block, decision, why, statement=PLAIN):
    stage, reasons = (decision, ()) if decision == LEAN else decision
    CASES.append(Case(name, family, block, stage, tuple(reasons), why, statement))


# --- Comments: Lean nests `/- -/`, Goedel's regex does not and removes blocks before `--`.
case(
    "nested_comment_hides_a_metaprogram",
    "comments",
    plain("  /- /- -/\n  run_tac Lean.Elab.Tactic.evalTactic default\n  -/\n  positivity"),
    gate("protocol_differential:nested_comment", "banned:run_tac"),
    "One comment to Lean's lexer; the regex ends it at the first `-/`, so Lean would run the "
    "`run_tac` line. Named as a nested comment; the compiled reading sees `run_tac` too.",
)
case(
    "nested_comment_in_the_docstring",
    "comments",
    plain("  positivity", before="/- outer /- inner -/ still outer -/\n"),
    gate("protocol_differential:nested_comment"),
    "Harmless here (before the theorem), but a comment opener inside a comment is a reading the "
    "protocol and Lean disagree on: refused whatever follows.",
)
case(
    "comment_opener_in_a_line_comment",
    "comments",
    plain("  -- see /- below\n  nlinarith [sq_nonneg x]\n  -- -/\n  positivity"),
    gate("protocol_differential:comment_opener_in_line_comment"),
    "Lean reads two line comments and the `nlinarith` line; the regex removes `/- ... -/` "
    "across the lines first, so Lean would get a different proof than the gate read.",
)
case(
    "a_removed_block_joins_two_dashes_into_a_comment",
    "comments",
    plain("  have : x - -x = 2 * x := by ring\n  nlinarith [sq_nonneg (x -/- c -/- x)]"),
    gate("protocol_differential:comment_removal"),
    "Lean reads `x - - x`; removing `/- c -/` leaves `x --x`, which the `--` rule then cuts: the "
    "tokens after the theorem differ, found by comparing the two readings.",
)
case(
    "unterminated_comment",
    "comments",
    plain("  positivity /- open"),
    gate("lex_error"),
    "Lean's lexer never closes the comment.",
)
# --- Strings, raw strings and «» names: the `--` rule cuts inside them.
case(
    "dashes_in_a_string_shift_what_is_code",
    "strings",
    plain(
        '  have h : "--" = "--" := rfl\n'
        '  have s : String := " run_tac Lean.Elab.Tactic.evalTactic default "\n'
        '  have u : String := "x"\n  positivity'
    ),
    gate("protocol_differential:comment_marker_in_string", "protocol_differential:comment_removal"),
    "Cutting line 1 at `--` leaves an open string that ends at line 2's first quote: the text the "
    "gate read as a string is code to Lean.",
)
case(
    "comment_opener_in_a_string",
    "strings",
    plain('  have : "/-" = "/-" := rfl\n  positivity\n  -- -/'),
    gate("protocol_differential:comment_marker_in_string"),
    "The regex removes from the string's `/-` to the `-/` in the comment.",
)
case(
    "dashes_in_a_raw_string",
    "strings",
    plain('  have : r#"a -- b"# = r#"a -- b"# := rfl\n  positivity'),
    gate("protocol_differential:comment_marker_in_raw_string"),
    "A raw string is a string to Lean and cut text to the regex.",
)
case(
    "dashes_in_a_quoted_name",
    "strings",
    plain("  have «h--x» : 0 < x := h₀\n  positivity"),
    gate("protocol_differential:comment_marker_in_quoted_name"),
    "`«h--x»` is one identifier to Lean; the regex cuts it open.",
)
case(
    "theorem_inside_a_string_before_the_real_one",
    "strings",
    plain("  positivity", before='def s := " theorem t (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2 := by"\n'),
    gate("protocol_differential:theorem", "dropped_by_reinsertion:def"),
    "Re-insertion takes the first `theorem ... := by` of the text, here inside a string: the "
    "proof Lean would get starts inside that string. The lexer's first theorem is another.",
)
case(
    "interpolated_string_runs_code",
    "strings",
    plain('  have : s!"{(sorry : ℕ)}" = "" := rfl\n  positivity'),
    gate("banned:interpolated_string"),
    '`s!"{...}"` elaborates the term between braces: a string to the lexer, code to Lean.',
)
# --- The compile view: it drops every line that starts with set_option, open or import.
case(
    "dropped_option_lines_open_a_string_for_the_gate",
    "compile view",
    plain(
        '  set_option maxHeartbeats 400000 in "\n'
        "  run_tac Lean.Elab.Tactic.evalTactic default\n"
        '  set_option maxHeartbeats 400000 in "\n  positivity'
    ),
    gate("protocol_differential:dropped_line", "banned:run_tac"),
    "To the gate the `run_tac` line is inside a string; the compile view drops both option lines, "
    "so Lean would run it.",
)
case(
    "an_option_line_carrying_a_tactic",
    "compile view",
    plain("  set_option maxHeartbeats 400000 in nlinarith [sq_nonneg x]\n  positivity"),
    gate("protocol_differential:dropped_line"),
    "The whole line is dropped, its tactic with it: Lean gets less than the gate read.",
)
case(
    "a_proof_line_that_starts_with_open",
    "compile view",
    plain("  have h : 0 < x := h₀\n  open_lemma_that_does_not_exist\n  positivity"),
    gate("protocol_differential:dropped_line"),
    "`openX` starts with `open`: the compile view drops the line although it is no command.",
)
case(
    "a_banned_option_on_a_dropped_line",
    "compile view",
    plain("  set_option debug.skipKernelTC true in\n  positivity"),
    gate("banned:set_option:debug.skipKernelTC"),
    "Lean never sees it, but the displayed code is training data: the gate reads it there.",
)
case(
    "a_bare_set_option_line",
    "compile view",
    plain("  positivity", after="set_option"),
    gate("protocol_differential:dropped_line", "banned:set_option:"),
    "A `set_option` with nothing after it is no plain option command.",
)
# --- Metaprogramming the old word list missed, and names in guillemets.
for name, proof, reason, why in [
    ("by_elab", "  exact by_elab pure default", "banned:by_elab", "Mathlib's term elaborator."),
    ("run_tac", "  run_tac pure ()", "banned:run_tac", "Runs TacticM code."),
    ("stop", "  stop\n  positivity", "banned:stop", "`stop` is `repeat sorry`."),
    (
        "eval_percent",
        "  have : 2 ^ 10 = eval% 2 ^ 10 := rfl\n  positivity",
        "banned:eval%",
        "Mathlib's `eval%` runs its term in the interpreter (`safety := .unsafe`).",
    ),
    (
        "quoted_meta_api",
        "  exact «Lean».«addDecl» default",
        "banned:«Lean».«addDecl»",
        "`«Lean».«addDecl»` is `Lean.addDecl`: compared without guillemets.",
    ),
    (
        "quoted_sorry",
        "  exact «sorryAx» _ true",
        "banned:«sorryAx»",
        "A quoted `sorryAx` is the same constant.",
    ),
    (
        "rooted_meta_api",
        "  exact _root_.Lean.ofReduceBool _ _ rfl",
        "banned:_root_.Lean.ofReduceBool",
        "`_root_.Lean.` is the meta API too.",
    ),
    ("sorry", "  sorry", "banned:sorry", "Literal sorry."),
    ("admit", "  admit", "banned:admit", "Literal admit."),
    ("sorryAx", "  exact sorryAx _ true", "banned:sorryAx", "A sorry without a warning."),
    ("native_decide", "  native_decide", "banned:native_decide", "Trusts the compiler."),
    ("decide_native", "  decide +native", "banned:native_decide", "The same, as an option."),
    ("unsafeCast", "  exact unsafeCast ()", "banned:unsafeCast", "Unsafe casts prove anything."),
    ("exit", "  positivity\n#exit", "banned:#exit", "Ends the file before the checks."),
]:
    case(f"word_{name}", "words", plain(proof), gate(reason), why)
for name, after, reason, why in [
    ("run_meta", "run_meta pure ()", "banned:run_meta", "Runs MetaM code as a command."),
    ("run_cmd", "run_cmd pure ()", "banned:run_cmd", "Runs CommandElabM code."),
    ("alias", "alias t' := t", "banned:alias", "Mathlib's `alias` declares a name."),
    ("notation3", 'notation3 "𝟚" => (2 : ℝ)', "banned:notation3", "Mathlib's notation command."),
    ("elab", 'elab "cheat" : tactic => pure ()', "banned:elab", "Defines an elaborator."),
    ("irreducible_def", "irreducible_def c : ℕ := 1", "banned:irreducible_def", "Mathlib def."),
    ("initialize", "initialize pure ()", "banned:initialize", "Runs IO at import."),
    ("simproc", "simproc s (_) := fun _ => pure .continue", "banned:simproc", "A simp procedure."),
    ("eval", "#eval Lean.modifyEnv id", "banned:#eval", "Runs code on the environment."),
    ("theorem", "theorem extra : False := by positivity", "banned:decl:theorem", "A 2nd theorem."),
    ("lemma", "lemma extra : True := trivial", "banned:decl:lemma", "Declared after the proof."),
    ("import", "import Mathlib.Tactic", "banned:import", "An import after the header."),
]:
    case(
        f"after_{name}",
        "commands after the proof",
        plain("  positivity", after=after),
        gate(reason),
        why,
    )
# --- What re-insertion drops: anything displayed before the theorem but the header.
for name, before, reasons, why in [
    (
        "helper_lemma",
        "lemma helper (y : ℝ) : 0 ≤ y ^ 2 := by positivity\n",
        ("dropped_by_reinsertion:lemma",),
        "Goedel keeps only the text after the theorem's `:= by`: a proof using `helper` fails "
        "on an unknown name, one not using it trains on text Lean never checked.",
    ),
    (
        "attributed_helper",
        "@[simp] lemma helper : (1 : ℝ) = 1 := rfl\n",
        ("dropped_by_reinsertion:@[",),
        "An attributed helper is dropped the same way.",
    ),
    (
        "axiom",
        "axiom h : 0 < (2 : ℝ)\n",
        ("dropped_by_reinsertion:axiom", "banned:axiom"),
        "A new axiom (also caught by `#print axioms`).",
    ),
    (
        "local_instance",
        "instance : Inhabited ℝ := ⟨1⟩\n",
        ("dropped_by_reinsertion:instance", "banned:instance"),
        "An instance could change what the statement means.",
    ),
    (
        "macro",
        'macro "cheat" : tactic => `(tactic| exact sorryAx _ true)\n',
        ("dropped_by_reinsertion:macro", "banned:macro"),
        "A macro expanding to sorryAx.",
    ),
    (
        "section_variable",
        "variable (hF : False)\n",
        ("dropped_by_reinsertion:variable", "banned:scope:variable"),
        "A section variable becomes a hypothesis under Lean 4.9.",
    ),
    (
        "implemented_by",
        "@[implemented_by g] def f : ℕ := 0\n",
        ("dropped_by_reinsertion:@[", "banned:implemented_by"),
        "Replaces a definition's code.",
    ),
    (
        "open_in",
        "open Real in\n",
        ("banned:open_in",),
        "Changes what the statement's names mean.",
    ),
    (
        "shadowing_namespace",
        "noncomputable def Real.sqrt (x : ℝ) : ℝ := 4\nnamespace Evil\n",
        ("dropped_by_reinsertion:noncomputable", "banned:scope:namespace"),
        "A namespace in which `Real.sqrt` means the candidate's.",
    ),
]:
    case(
        f"before_{name}",
        "dropped by re-insertion",
        plain("  positivity", before=before),
        gate(*reasons),
        why,
    )
case(
    "kernel_checks_off_in_the_candidates_header",
    "options",
    plain("  positivity", before="set_option debug.skipKernelTC true\n"),
    LEAN,
    "The line ends the candidate's header (imports, options and opens before the theorem). "
    "Re-insertion drops the whole header and Lean compiles the trusted one, so the kernel checks "
    "this proof as any other: nothing Lean never reads is judged (issue 45). Before: refused "
    "as banned:set_option:debug.skipKernelTC.",
)
case(
    "kernel_checks_off_after_a_helper",
    "options",
    plain("  positivity", before="lemma h : True := trivial\nset_option debug.skipKernelTC true\n"),
    gate("banned:set_option:debug.skipKernelTC", "dropped_by_reinsertion:lemma"),
    "After the header the candidate's own text is judged, options included: this one is not "
    "allowed (and the helper is dropped by re-insertion).",
)
case(
    "prelude",
    "options",
    "prelude\n" + plain("  positivity"),
    gate("banned:prelude", "banned:import"),
    "Redefines the core library. After the protocol's header it is no header `open` argument "
    "(the old header scan took it for one and no rule saw it).",
)
case(
    "meta_namespace_opened_in_the_header",
    "options",
    plain("  positivity").replace("open BigOperators", "open Lean Elab BigOperators"),
    LEAN,
    "Lean compiles the trusted header, not this one, and the proof uses no name of the meta API: "
    "not judged (issue 45). Before: refused as banned:open:Lean.",
)
case(
    "meta_name_used_after_the_header_opened_it",
    "options",
    plain("  exact Elab.admitGoal").replace("open BigOperators", "open Lean BigOperators"),
    LEAN,
    "`Elab.admitGoal` is no banned name as written, and the trusted header Lean compiles does "
    "not open `Lean`: Lean fails on an unknown identifier, which decides.",
)
# --- `#print axioms` and the namespace a preamble leaves open.
case(
    "alias_answers_for_the_theorem_in_its_namespace",
    "print axioms",
    namespaced("  positivity", after="alias Geo.p := trivial"),
    gate("banned:alias"),
    "Inside `namespace Geo`, `Geo.p` would resolve to this `Geo.Geo.p`: refused, and the axioms "
    "are asked of `_root_.Geo.p` besides.",
    NAMESPACED,
)
case(
    "a_declaration_named_like_the_theorem",
    "print axioms",
    namespaced("  positivity", after="theorem Geo.p : True := trivial"),
    gate("banned:decl:theorem"),
    "The same through a second theorem.",
    NAMESPACED,
)
case(
    "a_traced_axioms_message",
    "print axioms",
    plain("  trace \"'t' does not depend on any axioms\"\n  positivity"),
    LEAN,
    "Nothing for the gate to refuse: the proof's own info message never answers for "
    "`#print axioms`, which is read from its own answer (or its own line on the Kimina server).",
)
# --- Statements: the displayed theorem against the trusted one.
case(
    "weaker_statement",
    "statement",
    plain("  positivity").replace("0 < x ^ 2 := by", "0 ≤ x ^ 2 := by"),
    gate("statement_mismatch"),
    "Proves something else.",
)
case(
    "renamed_theorem",
    "statement",
    plain("  positivity").replace("theorem t ", "theorem t_disproof "),
    gate("theorem_renamed"),
    "Another name, the same signature.",
)
case(
    "a_default_argument_ends_the_regex_early",
    "statement",
    plain("  positivity").replace("(h₀ : 0 < x)", "(h₀ : 0 < x := by positivity)"),
    gate("statement_mismatch", "protocol_differential:theorem"),
    "The regex's `:= by` is the default argument's, not the signature's.",
)
case(
    "a_term_proof_has_no_tactic_block",
    "statement",
    MODEL_HEADER + SIGNATURE.removesuffix(" by") + "\n  pow_pos h₀ 2",
    ("reinsertion", ("reinsertion:code_has_no_theorem",)),
    "Goedel's regex needs `:= by`; without it re-insertion refuses, before Lean.",
)
case(
    "the_keyword_glued_to_a_quoted_name",
    "statement",
    plain("  positivity").replace("theorem t ", "theorem«t» "),
    ("reinsertion", ("reinsertion:code_has_no_theorem",)),
    "Lean reads `theorem«t»`; the regex wants whitespace after `theorem`.",
)
case(
    "apply_question_in_a_comment",
    "statement",
    plain("  -- apply? found nothing\n  positivity"),
    ("reinsertion", ("reinsertion:apply?_or_exact?",)),
    "Goedel refuses `apply?` anywhere in the text, comments included; kept for comparability.",
)
# --- Honest proofs: they reach Lean, their bytes as Goedel's protocol makes them.
for name, block, why in [
    ("plain", plain("  positivity"), "The control."),
    (
        "quoted_theorem_name",
        plain("  positivity").replace("theorem t ", "theorem «t» "),
        "`«t»` is the name `t`: not renamed.",
    ),
    (
        "docstring",
        plain("  positivity", before="/-- Squares of positives are positive. -/\n"),
        "A doc comment before the theorem is a comment.",
    ),
    ("line_comments", plain("  -- by positivity\n  positivity  -- done"), "Comments in the proof."),
    ("block_comment", plain("  /- the square of a positive -/\n  positivity"), "Not nested."),
    ("string", plain('  have : "a" = "a" := rfl\n  positivity'), "A string without markers."),
    ("quoted_hypothesis", plain("  have «h x» : 0 < x := h₀\n  positivity"), "A quoted name."),
    (
        "option_in_proof",
        plain("  set_option maxRecDepth 10000 in\n  positivity"),
        "A plain allowed option line: the compile view drops it, as Goedel's does.",
    ),
    (
        "option_before_theorem",
        plain("  positivity", before="set_option maxHeartbeats 400000 in\n"),
        "An allowed option before the theorem: dropped with the rest, harmlessly.",
    ),
    ("sorry_free_name", plain("  have sorry_free : 0 < x := h₀\n  positivity"), "Not `sorry`."),
    ("rooted_lemma", plain("  exact pow_pos h₀ 2"), "An ordinary lemma."),
]:
    case(f"honest_{name}", "honest", block, LEAN, why)
case(
    "honest_preamble_proof",
    "honest",
    namespaced("  unfold f\n  positivity"),
    LEAN,
    "The trusted preamble repeated, then the theorem.",
    NAMESPACED,
)
case(
    "honest_but_nested_comment_in_the_proof",
    "honest",
    plain("  /- we use /- positivity -/ here -/\n  positivity"),
    gate("protocol_differential:nested_comment"),
    "Honest, but it would reach Lean cut in half (`here -/`): refused with the reason instead.",
)
case(
    "honest_tactic_open_in_on_a_line_lean_never_reads",
    "honest",
    plain("  open Real in\n  positivity"),
    LEAN,
    "The compile view drops the whole plain `open ... in` line: Lean never reads it, so it "
    "changes no scope (issue 45). Before: refused as banned:scope:open.",
)
case(
    "an_open_lean_reads",
    "compile view",
    plain("  · open Real in positivity"),
    gate("banned:scope:open"),
    "The line starts with `·`, so the compile view keeps it: Lean reads the `open`, and the "
    "compiled reading refuses the scope change.",
)
case(
    "honest_pp_option",
    "honest",
    plain("  set_option pp.all true in\n  positivity"),
    LEAN,
    "A printing option, allowed with its reason (issue 45). Before: refused, over-strict by "
    "choice.",
)
# --- Issue 45. Code in a tactic's configuration: elaborated, then evaluated. Mathlib's
# `LinarithConfig.discharger : TacticM Unit` and its `oracle` run whatever the value is; a value
# may hold data only, and the first token that is not data is named with its field.
for name, proof, reason, why in [
    (
        "discharger_do_block",
        "  nlinarith [sq_nonneg x]\n"
        "    (config := { discharger := do for g in ← getGoals do g.assign default })",
        "banned:config:discharger:do",
        "A do block as linarith's discharger: run when linarith closes a goal, it assigns every "
        "goal a default proof term, with no banned word. Before: reached Lean.",
    ),
    (
        "oracle_function",
        "  linarith (config := { oracle := fun _ _ => pure default })",
        "banned:config:oracle:fun",
        "A certificate oracle written as a function: code Lean evaluates. Before: reached Lean.",
    ),
    (
        "lambda_nested_in_a_field",
        "  linarith (config := { transparency := .reducible, oracle := { run := λ _ => default } })",
        "banned:config:run:λ",
        "A λ inside a nested structure instance, named by its innermost field. Before: reached Lean.",
    ),
    (
        "discharger_by_block",
        "  linarith (config := { discharger := by exact pure () })",
        "banned:config:discharger:by",
        "A term built by tactics inside the configuration. Before: reached Lean.",
    ),
    (
        "discharger_bind_arrow",
        "  linarith (config := { discharger := ← getMainGoal })",
        "banned:config:discharger:←",
        "A monadic bind: code. Before: reached Lean.",
    ),
    (
        "anonymous_function_dot",
        "  linarith (config := { preprocessors := [(· )] })",
        "banned:config:preprocessors:·",
        "`(· ...)` is a function. Before: reached Lean.",
    ),
    (
        "quotation",
        "  linarith (config := { discharger := evalTactic `(tactic| positivity) })",
        "banned:config:discharger:`",
        "A name applied to a syntax quotation: both code; refused at the first token after the "
        "name, the quotation's backtick. Before: reached Lean.",
    ),
    (
        "antiquotation",
        "  linarith (config := { discharger := $t })",
        "banned:config:discharger:$",
        "An antiquotation. Before: reached Lean.",
    ),
    (
        "application",
        "  linarith (config := { discharger := pure () })",
        "banned:config:discharger:(",
        "A name applied to an argument is a computation, not data. Before: reached Lean.",
    ),
    (
        "simp_config_of_aesop",
        "  aesop (simp_config := { zeta := fun _ => true })",
        "banned:config:zeta:fun",
        "Any `<name>_config` argument is a configuration too. Before: reached Lean.",
    ),
]:
    case(f"config_{name}", "code in a tactic config", plain(proof), gate(reason), why)
for name, proof, why in [
    (
        "decide_flag",
        "  norm_num (config := { decide := true })\n  positivity",
        "Literals in fields: data (the shape of the shipped data's configurations).",
    ),
    (
        "constructor_names_and_layout",
        "  linarith (config := { transparency := .reducible, splitNe := true\n"
        "    exfalso := false })",
        "Leading-dot names, booleans, fields separated by layout: data.",
    ),
    ("empty", "  simp (config := {})\n  positivity", "An empty configuration is data."),
]:
    case(f"honest_config_{name}", "code in a tactic config", plain(proof), LEAN, why)
# --- Runners and admitting tactics of Mathlib (and the core it builds on), read from source:
# one candidate per entry of `prover_assets/data/gate/mathlib_runners.jsonl`.
for name, block, reasons, why in [
    ("run_tac", plain("  run_tac pure ()"), ("banned:run_tac",), "Runs TacticM code."),
    (
        "run_cmd",
        plain("  positivity", after="run_cmd pure ()"),
        ("banned:run_cmd", "banned:after_proof:run_cmd"),
        "Runs CommandElabM code; after the proof, at column 0.",
    ),
    ("by_elab", plain("  exact by_elab pure default"), ("banned:by_elab",), "Runs TermElabM code."),
    (
        "run_conv",
        plain("  conv => run_conv pure ()\n  positivity"),
        ("banned:run_conv",),
        "The conv-mode runner (`run_conv doSeq` expands to `run_tac`). Before: reached Lean.",
    ),
    (
        "eval%",
        plain("  have : 2 ^ 10 = eval% 2 ^ 10 := rfl\n  positivity"),
        ("banned:eval%",),
        "Runs its term in the interpreter.",
    ),
    (
        "slim_check",
        plain("  slim_check"),
        ("banned:slim_check",),
        "Tests the goal on random values and, when no counterexample shows, admits it: a proof "
        "with no sorry in its text and no warning. Before: reached Lean.",
    ),
    ("apply?", plain("  apply?"), ("banned:apply?",), "Admits the goal after its search."),
    (
        "polyrith",
        plain("  polyrith"),
        ("banned:polyrith",),
        "Starts curl to post the goal to a web service, at elaboration. Before: reached Lean.",
    ),
    (
        "sudo",
        plain("  exact sudo set_option debug.skipKernelTC true in pow_pos h₀ 2"),
        ("banned:sudo", "banned:set_option:debug.skipKernelTC"),
        "Sets any option inside a term. Before: refused for the option only.",
    ),
    (
        "variable?",
        plain("  positivity", after="variable? [Fact (1 < 2)]"),
        ("banned:decl:variable?", "banned:after_proof:variable?"),
        "Mathlib's `variable?` command, an identifier to the lexer: its `?` hid it from the "
        "declaration words. Before: reached Lean.",
    ),
    (
        "mk_iff_of_inductive_prop",
        plain("  positivity", after="mk_iff_of_inductive_prop List.Chain chain_iff'"),
        ("banned:mk_iff_of_inductive_prop", "banned:after_proof:mk_iff_of_inductive_prop"),
        "Declares an iff lemma with no declaration keyword. Before: reached Lean.",
    ),
]:
    case(f"runner_{name}", "runners from Mathlib's source", block, gate(*reasons), why)
# --- Commands after the proof. Lean ends a tactic block at the first line left of its column;
# what stands there is a command, refused whatever its word. Words that need no declaration
# keyword are refused also at the tactics' column, where Lean ends the block too.
for name, after, reasons, why in [
    (
        "binder_predicate",
        'binder_predicate x " > " y:term => x > y',
        ("banned:after_proof:binder_predicate", "banned:decl:binder_predicate"),
        "Declares syntax and macro rules. Before: reached Lean.",
    ),
    (
        "unification_hint",
        "unif_hint (n : ℕ) where n =?= 0 ⊢ n + 0 =?= 0",
        ("banned:after_proof:unif_hint", "banned:decl:unif_hint"),
        "Registers a unification hint. Before: reached Lean.",
    ),
    (
        "simp_like_tactic",
        'declare_simp_like_tactic mySimp "my_simp " (autoUnfold := true)',
        ("banned:after_proof:declare_simp_like_tactic",),
        "Declares a tactic. Before: reached Lean.",
    ),
    (
        "a_command_no_list_knows",
        "frobnicate_everything t",
        ("banned:after_proof:frobnicate_everything",),
        "A command the next Mathlib may add: refused by where it stands, not by its word.",
    ),
    (
        "simp_attribute_command",
        "attribute [simp] t",
        ("banned:after_proof:attribute", "banned:decl:attribute"),
        "Registers the theorem as a simp lemma.",
    ),
    (
        "notation",
        'notation "𝟚" => (2 : ℝ)',
        ("banned:after_proof:notation", "banned:notation"),
        "Adds syntax.",
    ),
    ("macro", 'macro "cheat" : tactic => `(tactic| rfl)', ("banned:after_proof:macro",), "Syntax."),
    ("syntax", 'syntax "cheat" : tactic', ("banned:after_proof:syntax",), "Adds syntax."),
    (
        "where_clause",
        "where\n  aux : 0 < (1 : ℝ) := one_pos",
        ("banned:after_proof:where", "banned:decl:where"),
        "Auxiliary definitions of the theorem: a second declaration.",
    ),
]:
    case(
        f"after_proof_{name}",
        "commands after the proof",
        plain("  positivity", after=after),
        gate(*reasons),
        why,
    )
case(
    "a_command_word_at_the_tactics_column",
    "commands after the proof",
    plain('  positivity\n  binder_predicate x " > " y:term => x > y'),
    gate("banned:decl:binder_predicate"),
    "No tactic starts with `binder_predicate`, so Lean ends the block and reads the command: "
    "refused by its word where the column cannot tell. Before: reached Lean.",
)
case(
    "a_question_mark_command_at_the_tactics_column",
    "commands after the proof",
    plain("  positivity\n  variable? [Fact (1 < 2)]"),
    gate("banned:decl:variable?"),
    "The `?`-ending command inside the proof's column. Before: reached Lean.",
)
case(
    "an_unmatched_bracket_ends_the_proof",
    "commands after the proof",
    plain("  (positivity))\nfrobnicate_everything t"),
    gate("banned:after_proof:)"),
    "A closing bracket no opening one matches ends the proof's term: what follows is a command.",
)
case(
    "an_unindented_proof",
    "commands after the proof",
    MODEL_HEADER + SIGNATURE + "\npositivity\nfrobnicate_everything t",
    gate("banned:unindented_proof"),
    "At column 0 a tactic and a command stand alike: refused (the shipped data has none).",
)
# --- Honest proofs refused before for what Lean never reads (issue 45).
for name, block, why in [
    (
        "line_comment_with_an_opener",
        plain("  -- divide by (-20)/-10\n  positivity"),
        "No `-/` follows the `/-`: the regex removes nothing, Lean skips the line comment. "
        "Before: refused as protocol_differential:comment_opener_in_line_comment.",
    ),
    (
        "synth_instance_heartbeats",
        plain("  set_option synthInstance.maxHeartbeats 100000 in\n  positivity"),
        "A resource limit of type-class search, allowed with its reason. Before: refused.",
    ),
    (
        "linter_option",
        plain("  set_option linter.unusedVariables false in\n  positivity"),
        "Turns warnings off. Before: refused.",
    ),
    (
        "options_in_its_own_header",
        plain("  positivity").replace(
            "set_option maxHeartbeats 400000",
            "set_option maxHeartbeats 400000\nset_option maxRecDepth 100000\n"
            "set_option pp.all true",
        ),
        "The candidate's header is dropped by re-insertion; Lean compiles the trusted one. "
        "Before: refused as banned:set_option:pp.all.",
    ),
    (
        "proof_on_the_by_line",
        MODEL_HEADER + SIGNATURE + " positivity",
        "The block's column is its first tactic's, on the `by` line.",
    ),
    (
        "argument_list_continued_at_column_0",
        plain("  nlinarith [sq_nonneg (x - 1),\nsq_nonneg (x + 1)]"),
        "Inside brackets a line's column does not end the block.",
    ),
    (
        "sequence_continued_after_its_operator",
        plain("  cases' le_total x 1 with h h <;>\n  nlinarith [sq_nonneg (x - 1)]"),
        "A line after `<;>` continues the tactic.",
    ),
]:
    case(f"honest_{name}", "honest", block, LEAN, why)
# --- Commands on the proof's own line. Lean needs no new line to end a tactic block: a tactic
# ends where its syntax does, and a command keyword after it starts a command there (after a
# multi-line string, on the string's last line). No column tells, and the words below were in no
# word list: each keyword of the pinned Mathlib's `command` category is refused wherever it stands
# in a proof (`data/gate/mathlib_commands.jsonl`), but the four that are also tactics.
for name, proof, reasons, why in [
    (
        "compile_inductive",
        "  positivity compile_inductive% List",
        ("banned:after_proof:compile_inductive%",),
        "`positivity` takes no argument, so the block ends at `compile_inductive%` and Lean runs "
        "Mathlib's command, which adds compiled code and a `csimp` lemma for a recursor. Before: "
        "reached Lean.",
    ),
    (
        "after_a_multiline_string",
        '  positivity\n  trace "done\n"assert_not_exists Foo',
        ("banned:after_proof:assert_not_exists",),
        "The string ends at the start of its second line and the command follows the quote: no "
        "line of code starts there, so the column rule never saw it. Before: reached Lean.",
    ),
    (
        "library_note",
        '  positivity library_note "n" /-- text -/',
        ("banned:after_proof:library_note",),
        "Batteries' command adds a declaration to the environment. Before: reached Lean.",
    ),
    (
        "proof_wanted",
        "  positivity proof_wanted extra : False",
        ("banned:after_proof:proof_wanted",),
        "Batteries' command elaborates a statement as an axiom, then drops it. Before: reached "
        "Lean.",
    ),
    (
        "test_extern",
        "  positivity test_extern Nat.add 1 2",
        ("banned:after_proof:test_extern",),
        "Lean core's command evaluates compiled code while Lean elaborates. Before: reached Lean.",
    ),
    (
        "gen_injective_theorems",
        "  positivity gen_injective_theorems% Nat",
        ("banned:after_proof:gen_injective_theorems%",),
        "Lean core's bootstrapping command declares theorems. Before: reached Lean.",
    ),
    (
        "after_a_closing_bracket",
        "  nlinarith [sq_nonneg x] with_weak_namespace Real alias sq' := sq_nonneg",
        ("banned:after_proof:with_weak_namespace", "banned:alias"),
        "After its argument list the tactic is complete; Mathlib's `with_weak_namespace` runs the "
        "command it wraps in another namespace. Before: refused for `alias` alone.",
    ),
]:
    case(f"same_line_{name}", "commands on the proof's line", plain(proof), gate(*reasons), why)
for name, proof, why in [
    (
        "count_heartbeats_tactic",
        "  count_heartbeats in\n  positivity",
        "A command keyword that is also Mathlib's tactic `count_heartbeats in tacs` at the pin "
        "(`proof_block.ALSO_TACTICS`): what it wraps is judged as any tactic.",
    ),
    (
        "keywords_in_names_strings_and_comments",
        "  -- library_note: compile_inductive% is not needed\n"
        "  have lemma_1 : 0 < x := h₀\n"
        '  have «lemma» : "end" = "end" := rfl\n'
        "  exact pow_pos lemma_1 2",
        "`lemma_1` and `«lemma»` are identifiers to Lean, and a comment or a string is no code.",
    ),
    (
        "keyword_as_a_name_component",
        "  have e : Function.End ℝ := id\n  positivity",
        "`Function.End` is one identifier: a dotted component is never a keyword.",
    ),
]:
    case(f"honest_{name}", "commands on the proof's line", plain(proof), LEAN, why)
