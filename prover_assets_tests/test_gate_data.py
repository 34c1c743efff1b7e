"""The gate's data files: what ships loads, and a malformed line is refused with file and line."""

import json
import re

import pytest

from prover_assets.lean.gate_data import (
    ALLOWED_OPTIONS,
    RUNNERS,
    AllowedOption,
    GateDataError,
    load_allowed_options,
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
