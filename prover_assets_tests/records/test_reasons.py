"""A verdict's reason: its kind and detail, built and parsed in one place, refused when of
another shape, and kept as text in a verdict file."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from prover_assets.records import RecordError, Verification, publish_records, read_records
from prover_assets.records.reasons import Reason, reason_kind
from prover_assets_tests.factories import make_verification


@pytest.mark.parametrize(
    ("reason", "kind", "detail"),
    [
        ("banned:sorry", "banned", "sorry"),
        ("no_code", "no_code", None),  # a bare kind
        ("axiom:Classical.choice", "axiom", "Classical.choice"),
        # the detail may hold colons
        ("by_count:2 markers: one inside a comment", "by_count", "2 markers: one inside a comment"),
        ("infrastructure:", "infrastructure", ""),  # an empty detail is not none
    ],
)
def test_a_reasons_kind_is_what_comes_before_its_first_colon(reason, kind, detail):
    assert reason_kind(reason) == kind
    assert (Reason.parse(reason).kind, Reason.parse(reason).detail) == (kind, detail)


@pytest.mark.parametrize("text", ["", "Banned:sorry", ":sorry", "banned sorry", "2fast:x"])
def test_a_text_of_another_shape_is_no_reason(text):
    with pytest.raises(ValueError, match="is not a reason"):
        Reason.parse(text)


def test_a_verdicts_reasons_are_read_back_typed_and_written_as_text(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    publish_records(path, [make_verification(accepted=False, reasons=["banned:sorry"])])
    assert json.loads(path.read_text())["reasons"] == ["banned:sorry"]
    (read,) = read_records(path, Verification)
    assert isinstance(read.reasons[0], Reason)
    assert (read.reasons[0].kind, read.reasons[0].detail) == ("banned", "sorry")


def test_a_verdict_file_with_a_malformed_reason_is_refused_naming_its_line(tmp_path):
    row = json.loads(make_verification(accepted=False).model_dump_json())
    path = tmp_path / "verdicts.jsonl"
    path.write_text(json.dumps({**row, "reasons": ["Sorry!"]}) + "\n")
    with pytest.raises(RecordError, match=r"verdicts\.jsonl:1.*is not a reason"):
        read_records(path, Verification)


def test_a_model_built_now_reads_and_writes_reasons_as_the_records_do():
    class Held(BaseModel):  # its schema is built here, as each record's is when imported
        model_config = ConfigDict(strict=True)
        reasons: list[Reason]

    held = Held.model_validate_json('{"reasons": ["banned:sorry", "no_code"]}')
    assert [type(r) for r in held.reasons] == [Reason, Reason]
    assert [r.kind for r in held.reasons] == ["banned", "no_code"]
    assert held.model_dump_json() == '{"reasons":["banned:sorry","no_code"]}'
    with pytest.raises(ValidationError, match="is not a reason"):
        Held(reasons=["Banned"])
    with pytest.raises(ValidationError, match="string"):
        Held(reasons=[3])
