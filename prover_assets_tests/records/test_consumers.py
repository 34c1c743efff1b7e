"""Every consumer checks what it reads: a byte flipped in an upstream file after its step
completed is refused, naming the file, before anything is built from it."""

import json

import pytest

from prover_assets.records import Verification, publish_records, read_records
from prover_assets.records.outputs import (
    ChecksumError,
    StageResult,
    Step,
    StepInputs,
    verified_outputs,
)
from prover_assets.sft.stages import materialize_checkpoint, materialize_export
from prover_assets_tests.factories import make_verification


def completed(folder, files: dict[str, bytes]):
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    finish(folder, [folder / name for name in files])
    return folder


def finish(folder, outputs) -> None:
    Step(folder, str(folder), StageResult, StepInputs.hash({}), {}).finish(StageResult(), outputs)


def flip_a_byte(path, offset=3):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_flipped_byte_is_refused_naming_the_file(tmp_path):
    folder = completed(tmp_path / "shards", {"tokens-00000.bin": b"\x00" * 64, "rows.jsonl": b""})
    assert set(verified_outputs(folder)) == {
        (folder / n).resolve() for n in ("tokens-00000.bin", "rows.jsonl")
    }
    flip_a_byte(folder / "tokens-00000.bin")
    with pytest.raises(ChecksumError, match=r"tokens-00000\.bin"):
        verified_outputs(folder)
    assert verified_outputs(folder, ["rows.jsonl"])  # the other file is still what was recorded


def test_a_file_the_manifest_does_not_list_is_refused(tmp_path):
    folder = completed(tmp_path / "out", {"a.jsonl": b""})
    (folder / "b.jsonl").write_bytes(b"")
    with pytest.raises(ChecksumError, match="not an output"):
        verified_outputs(folder, ["b.jsonl"])


def test_a_verdict_flipped_in_place_with_its_code_hash_kept_is_caught(tmp_path):
    folder = tmp_path / "verdicts"
    folder.mkdir()
    publish_records(folder / "verdicts.jsonl", [make_verification(accepted=False)])
    finish(folder, [folder / "verdicts.jsonl"])
    (verdict,) = read_records(folder / "verdicts.jsonl", Verification)
    row = json.loads(verdict.model_dump_json())
    row.update(accepted=True, stage="accepted", reasons=[])
    (folder / "verdicts.jsonl").write_text(json.dumps(row) + "\n")
    assert read_records(folder / "verdicts.jsonl", Verification)[0].accepted  # valid, but...
    with pytest.raises(ChecksumError, match=r"verdicts\.jsonl"):
        verified_outputs(folder, ["verdicts.jsonl"])


def test_training_refuses_a_corrupted_shard_before_starting(tmp_path):
    shards = completed(tmp_path / "shards", {"tokens-00000.bin": b"\x01" * 64, "rows.jsonl": b""})
    flip_a_byte(shards / "tokens-00000.bin")
    with pytest.raises(ChecksumError, match=r"tokens-00000\.bin"):
        materialize_checkpoint(
            tmp_path / "checkpoint",
            shards_dir=shards,
            base_model_dir=tmp_path,
            base_revision="demo",
            training=None,
            device="cpu",
        )
    assert not (tmp_path / "checkpoint").exists()


def test_the_export_refuses_a_changed_adapter(tmp_path):
    checkpoint = completed(tmp_path / "checkpoint", {"adapter_model.safetensors": b"\x02" * 64})
    flip_a_byte(checkpoint / "adapter_model.safetensors")
    with pytest.raises(ChecksumError, match=r"adapter_model\.safetensors"):
        materialize_export(
            tmp_path / "export",
            checkpoint_dir=checkpoint,
            base_model_dir=tmp_path,
            shards_dir=tmp_path,
            dtype="float32",
        )
    assert not (tmp_path / "export").exists()


def test_a_completed_output_is_not_read_again_while_its_stamp_is_unchanged(tmp_path, monkeypatch):
    from prover_assets.records import hashing

    folder = completed(tmp_path / "out", {"a.bin": b"\x01" * 64, "b.bin": b"\x02" * 64})
    read: list[str] = []
    real = hashing.sha256_file
    monkeypatch.setattr(hashing, "sha256_file", lambda p: read.append(str(p)) or real(p))
    assert len(verified_outputs(folder)) == 2
    assert read == []
    flip_a_byte(folder / "b.bin")
    with pytest.raises(ChecksumError, match=r"b\.bin"):
        verified_outputs(folder)
    assert read == [str(folder / "b.bin")]


def test_an_empty_result_says_where_every_row_went():
    from prover_assets.records.outputs import EmptyOutputError, require_rows

    with pytest.raises(EmptyOutputError) as refused:
        require_rows(
            0, "the pool's candidates (6 rows read)", dropped={"lex_error": 4, "too_long": 2}
        )
    assert str(refused.value) == (
        "the pool's candidates (6 rows read) has 0 rows: nothing downstream could be judged on "
        "it (every row was dropped: lex_error 4, too_long 2). Check the input and filters; if "
        "empty is expected, set allow_empty: true for it in the config."
    )
    require_rows(0, "allowed", allow_empty=True, dropped={"x": 1})
    require_rows(3, "kept", dropped={"x": 1})
