"""Golden tests: the protocol's prompt texts and the correction error block, byte for byte."""

from prover_assets.generation.prompts import correction_messages, round0_messages
from prover_assets.lean.feedback import format_error_block

STATEMENT = "theorem t (x : ℝ) : x ^ 2 ≥ 0 := by sorry"


def test_round0_message_is_the_protocol_text():
    assert [m.model_dump() for m in round0_messages(STATEMENT)] == [
        {
            "role": "user",
            "content": "Complete the following Lean 4 code:\n\n```lean4\n"
            "theorem t (x : ℝ) : x ^ 2 ≥ 0 := by sorry```\n\n"
            "Before producing the Lean 4 code to formally prove the given theorem, provide a "
            "detailed proof plan outlining the main proof steps and strategies.\n"
            "The plan should highlight key ideas, intermediate lemmas, and proof structures that "
            "will guide the construction of the final formal proof.",
        }
    ]


def test_correction_messages_append_the_attempt_and_the_errors():
    first = round0_messages(STATEMENT)
    messages = correction_messages(first, "my failed attempt", "\nError 1:\n...", round=1)
    assert messages[:1] == first
    assert messages[1].model_dump() == {"role": "assistant", "content": "my failed attempt"}
    assert messages[2].model_dump() == {
        "role": "user",
        "content": "The proof (Round 0) is not correct. Following is the compilation error message, "
        "where we use <error></error> to signal the position of the error.\n\n\nError 1:\n...\n\n"
        "Before producing the Lean 4 code to formally prove the given theorem, provide a detailed "
        "analysis of the error message.",
    }


def test_second_correction_names_round_one_and_keeps_the_whole_conversation():
    first = correction_messages(round0_messages(STATEMENT), "a0", "E0", round=1)
    second = correction_messages(first, "a1", "E1", round=2)
    assert [m.role for m in second] == ["user", "assistant", "user", "assistant", "user"]
    assert second[-1].content.startswith("The proof (Round 1) is not correct.")


def error(line, column, end_line=None, end_column=None, data="msg"):
    end = None if end_line is None else {"line": end_line, "column": end_column}
    return {
        "severity": "error",
        "pos": {"line": line, "column": column},
        "endPos": end,
        "data": data,
    }


CODE = "\n".join(f"line{i}" if i else "theorem t : True := by" for i in range(14))


def test_single_line_error_with_four_lines_before_and_one_after():
    block = format_error_block(CODE, [error(7, 2, 7, 4)])
    assert block == (
        "\nError 1:\n\nCorresponding Code:\n```lean4\n"
        "line2\nline3\nline4\nline5\n"
        "li<error>ne</error>6\n"
        "line7\n"
        "\n```\n\nError Message: msg\n"
    )


def test_error_on_the_first_line_has_no_lines_before():
    block = format_error_block(CODE, [error(1, 8, 1, 9)])
    assert block == (
        "\nError 1:\n\nCorresponding Code:\n```lean4\n"
        "theorem <error>t</error> : True := by\n"
        "line1\n"
        "\n```\n\nError Message: msg\n"
    )


def test_null_end_position_marks_to_the_end_of_the_line():
    block = format_error_block("a\nbb := by\n  simp", [error(3, 2)])
    assert block == (
        "\nError 1:\n\nCorresponding Code:\n```lean4\n"
        "a\nbb := by\n"
        "  <error>simp</error>\n"
        "\n```\n\nError Message: msg\n"
    )


def test_multi_line_error_within_six_lines_is_shown_whole():
    block = format_error_block(CODE, [error(2, 3, 4, 2)])
    assert block == (
        "\nError 1:\n\nCorresponding Code:\n```lean4\n"
        "theorem t : True := by\n"
        "lin<error>e1\n"
        "line2\n"
        "li</error>ne3\n"
        "line4\n"
        "\n```\n\nError Message: msg\n"
    )


def test_multi_line_error_past_the_truncation_point():
    code = "\n".join(["start := by"] + [f"    step{i}" for i in range(1, 13)])
    block = format_error_block(code, [error(2, 4, 11, 9, data="unsolved goals")])
    assert block == (
        "\nError 1:\n\nCorresponding Code:\n```lean4\n"
        "start := by\n"
        "    <error>step1\n"
        "    step2\n    step3\n    step4\n    step5\n    step6\n"
        "\n    ... --[Truncated]-- ...\n"
        "    step1</error>0\n"
        "    step11\n"
        "\n```\n\nError Message: unsolved goals\n"
    )


def test_more_than_eight_errors_are_omitted_with_their_count():
    errors = [error(2, 0, 2, 5, data=f"e{i}") for i in range(11)]
    block = format_error_block(CODE, errors)
    assert block.count("\nError Message: ") == 8
    assert "Error 8:" in block and "Error 9:" not in block
    assert block.endswith("\nError Message: e7\n\n... [Omitted 3 more errors] ...\n")


def test_no_errors_give_an_empty_block():
    assert format_error_block(CODE, []) == ""
