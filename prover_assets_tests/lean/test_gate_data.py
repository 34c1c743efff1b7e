"""The gate's data files: what ships loads, and a malformed line is refused with file and line."""

import json
import re

import pytest

from prover_assets.lean.gate_data import (
    ALLOWED_OPTIONS,
    COMMANDS,
    RUNNERS,
    AllowedOption,
    Command,
    GateDataError,
    load_allowed_options,
    load_commands,
    load_runners,
)

RUN_TAC = {
    "name": "run_tac",
    "kind": "runs_code",
    "category": "tactic",
    "repo": "leanprover-community/mathlib4",
    "file": "Mathlib/Tactic/RunCmd.lean",
    "commit": "03a21efde4ba4474f1bbd7cd2256b2b8b7f5c93f",
    "why": "runs a do block",
}


def _write(tmp_path, rows):
    path = tmp_path / "runners.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_the_shipped_runner_list_names_its_source_for_each_entry():
    assert {"run_tac", "run_conv", "slim_check", "apply?", "eval%", "variable?"} <= {
        runner.name for runner in RUNNERS
    }
    assert all(runner.file.endswith(".lean") and len(runner.commit) == 40 for runner in RUNNERS)


def test_the_shipped_options_are_limits_linters_and_printing_each_with_a_reason():
    names = {option.name for option in ALLOWED_OPTIONS}
    assert {"maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats", "pp.all"} <= names
    assert not any(name.startswith(("debug.", "trace.", "compiler.")) for name in names)


def test_a_valid_line_loads_and_eval_percent_is_a_percent_runner(tmp_path):
    path = _write(tmp_path, [RUN_TAC, {**RUN_TAC, "name": "eval%", "category": "term"}])
    runners = load_runners(path)
    assert [(r.name, r.percent) for r in runners] == [("run_tac", False), ("eval%", True)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "dangerous"}, "kind 'dangerous'"),
        ({"category": "widget"}, "category 'widget'"),
        ({"commit": "d1d1e4b72"}, "not 40 lowercase hex digits"),
        ({"name": "run tac"}, "is not one identifier"),
        ({"name": "%"}, "is not one identifier"),
        ({"name": "by_elab /-"}, "is not one identifier"),
        ({"file": "Mathlib/Tactic/RunCmd.py"}, "is not a Lean file of a repo"),
        ({"why": ""}, "'why' must be a non-empty string"),
        ({"extra": "x"}, "expected the fields"),
    ],
    ids=[
        *["kind", "category", "short_commit", "two_words", "bare_percent", "unclosed_comment"],
        *["file", "empty", "extra"],
    ],
)
def test_a_malformed_runner_is_refused_naming_the_file_and_line(tmp_path, change, message):
    path = _write(tmp_path, [RUN_TAC, {**RUN_TAC, "name": "by_elab", **change}])
    with pytest.raises(GateDataError, match=rf"{re.escape(str(path))}:2: .*{message}"):
        load_runners(path)


def test_a_runner_listed_twice_is_refused(tmp_path):
    path = _write(tmp_path, [RUN_TAC, RUN_TAC])
    with pytest.raises(
        GateDataError, match=rf"{re.escape(str(path))}:2: 'run_tac' is listed twice"
    ):
        load_runners(path)


def test_a_line_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "runners.jsonl"
    path.write_text(json.dumps(RUN_TAC) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(GateDataError, match=rf"{re.escape(str(path))}:2: not JSON"):
        load_runners(path)


def test_an_empty_file_is_refused(tmp_path):
    path = _write(tmp_path, [])
    with pytest.raises(GateDataError, match="no entries"):
        load_runners(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"name": "set_option maxHeartbeats", "why": "x"}, "is not an option name"),
        ({"name": '"maxHeartbeats', "why": "x"}, "is not an option name"),
        ({"name": "maxHeartbeats"}, "expected the fields"),
        (["maxHeartbeats"], "expected the fields"),
    ],
    ids=["two_words", "unclosed_string", "no_reason", "not_an_object"],
)
def test_a_malformed_option_is_refused_naming_the_file_and_line(tmp_path, row, message):
    path = _write(tmp_path, [row])
    with pytest.raises(GateDataError, match=rf"{re.escape(str(path))}:1: .*{message}"):
        load_allowed_options(path)


def test_an_option_listed_twice_is_refused(tmp_path):
    row = {"name": "maxHeartbeats", "why": "a limit"}
    path = _write(tmp_path, [row, row])
    with pytest.raises(
        GateDataError, match=rf"{re.escape(str(path))}:2: 'maxHeartbeats' is listed twice"
    ):
        load_allowed_options(path)


def test_a_valid_options_file_loads_each_option_with_its_reason(tmp_path):
    rows = [{"name": "maxHeartbeats", "why": "a limit"}, {"name": "pp.all", "why": "printing"}]
    assert load_allowed_options(_write(tmp_path, rows)) == (
        AllowedOption("maxHeartbeats", "a limit"),
        AllowedOption("pp.all", "printing"),
    )


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ('{"name": "maxHeartbeats"}', "['name']"),
        ('["maxHeartbeats", "a limit"]', "list"),
        ("5", "int"),
        ("null", "NoneType"),
    ],
    ids=["missing_field", "array", "number", "null"],
)
def test_a_line_without_the_fields_is_refused_naming_what_it_holds(tmp_path, line, found):
    path = tmp_path / "options.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(GateDataError) as raised:
        load_allowed_options(path)
    assert str(raised.value) == f"{path}:1: expected the fields ['name', 'why'], got {found}"


PIN = "d1d1e4b72c6e009edd97cabe1d661b021fe8eeae"
LIBRARY_NOTE = {
    "name": "library_note",
    "repo": "leanprover-community/batteries",
    "file": "Batteries/Util/LibraryNote.lean",
    "commit": "f96a34401de084c73c787ecb45b85d4fb47bb981",
    "declaration": 'elab "library_note " title:strLit ppSpace text:docComment : command',
}


def test_the_shipped_commands_name_the_pinned_sources_of_the_gaps_found():
    by_name = {command.name: command for command in COMMANDS}
    assert by_name["compile_inductive%"] == Command(
        "compile_inductive%",
        "leanprover-community/mathlib4",
        "Mathlib/Util/CompileInductive.lean",
        PIN,
        'elab tk:"compile_inductive% " i:ident : command',
    )
    assert by_name["assert_not_exists"].file == "Mathlib/Util/AssertExists.lean"
    assert by_name["assert_not_exists"].commit == PIN
    assert by_name["library_note"] == Command(**LIBRARY_NOTE)
    assert by_name["open"].file == "src/Lean/Parser/Command.lean"
    assert {"lemma", "variable?", "count_heartbeats!", "declare_aesop_rule_sets"} <= set(by_name)
    # Hash commands are one token the gate refuses whatever its word; `in` leads no command.
    assert not any(name.startswith("#") or name == "in" for name in by_name)


def test_a_valid_command_line_loads_and_a_percent_keyword_is_marked(tmp_path):
    percent = {
        **LIBRARY_NOTE,
        "name": "compile_def%",
        "declaration": 'elab tk:"compile_def% " i:ident : command',
    }
    commands = load_commands(_write(tmp_path, [LIBRARY_NOTE, percent]))
    assert [(c.name, c.percent) for c in commands] == [
        ("library_note", False),
        ("compile_def%", True),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "library note"}, "name 'library note' is not one identifier (or one and %)"),
        ({"name": "%"}, "name '%' is not one identifier (or one and %)"),
        ({"name": "#eval"}, "name '#eval' is not one identifier (or one and %)"),
        ({"commit": "f96a344"}, "commit 'f96a344' is not 40 lowercase hex digits"),
        ({"commit": "F" * 40}, f"commit '{'F' * 40}' is not 40 lowercase hex digits"),
        (
            {"file": "Batteries/Util/LibraryNote.md"},
            "leanprover-community/batteries:Batteries/Util/LibraryNote.md is not a Lean file",
        ),
        ({"repo": "batteries"}, "batteries:Batteries/Util/LibraryNote.lean is not a Lean file"),
        ({"declaration": "library_note x"}, "does not quote 'library_note' as an atom"),
        ({"declaration": ""}, "'declaration' must be a non-empty string"),
        ({"why": "x"}, "expected the fields"),
    ],
    ids=[
        "two_words",
        "bare_percent",
        "hash_command",
        "short_commit",
        "upper_case_commit",
        "not_lean",
        "no_owner",
        "a_use_not_a_declaration",
        "empty",
        "extra",
    ],
)
def test_a_malformed_command_is_refused_naming_the_file_and_line(tmp_path, change, message):
    path = _write(tmp_path, [LIBRARY_NOTE, {**LIBRARY_NOTE, **change}])
    with pytest.raises(GateDataError, match=rf"^{re.escape(str(path))}:2: .*{re.escape(message)}"):
        load_commands(path)


def test_a_command_listed_twice_is_refused(tmp_path):
    path = _write(tmp_path, [LIBRARY_NOTE, {**LIBRARY_NOTE, "file": "Mathlib/Other.lean"}])
    with pytest.raises(
        GateDataError, match=rf"^{re.escape(str(path))}:2: 'library_note' is listed twice$"
    ):
        load_commands(path)
