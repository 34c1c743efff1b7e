"""The demo's format-tuned models shared across data roots: tuned once, copied whole and checked,
a torn or edited entry refused, one tuner at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prover_assets.demo.shared_tunings import (
    SharedTuningError,
    copy_tuning,
    holding_entry,
    publish_tuning,
    tuning_key,
)
from prover_assets.demo.tiny_model import FormatTuningResult
from prover_assets.generation.stages import materialize_demo_model
from prover_assets.records import publish_records
from prover_assets.records.hashing import sha256_file
from prover_assets_tests.factories import make_problem

TINY = {"hidden_size": 16, "layers": 1, "vocab_size": 300, "steps": 2, "seed": 3}
RESULT = FormatTuningResult(steps=2, first_loss=5.0, final_loss=4.0, seconds=1.5, examples=2)


def statements(folder: Path) -> list[Path]:
    path = folder / "eval" / "problems.jsonl"
    path.parent.mkdir(parents=True)
    publish_records(
        path, [make_problem("p1"), make_problem("p2", "theorem p2 : 1 = 1 := by sorry")]
    )
    return [path]


def model_files(folder: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted((folder / "model").iterdir())}


def an_entry(shared: Path, tmp_path: Path) -> Path:
    model = tmp_path / "tuned"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\x01\x02")
    (model / "config.json").write_text("{}")
    entry = shared / tuning_key({"eval": "ab"}, TINY)
    publish_tuning(entry, model, inputs={"eval": "ab"}, settings=TINY, result=RESULT)
    return entry


def test_the_key_changes_with_any_input_digest_or_setting():
    key = tuning_key({"eval": "ab"}, TINY)
    assert key != tuning_key({"eval": "ac"}, TINY)
    assert key != tuning_key({"eval": "ab"}, {**TINY, "steps": 3})
    assert key == tuning_key({"eval": "ab"}, dict(reversed(TINY.items())))  # order is not identity


def test_no_entry_copies_nothing(tmp_path):
    assert copy_tuning(tmp_path / "shared" / "absent", tmp_path / "model") is None
    assert not (tmp_path / "model").exists()


def test_a_published_entry_is_copied_byte_for_byte_with_its_result(tmp_path):
    entry = an_entry(tmp_path / "shared", tmp_path)
    assert copy_tuning(entry, tmp_path / "copy") == RESULT
    assert (tmp_path / "copy" / "weights.bin").read_bytes() == b"\x01\x02"
    assert (tmp_path / "copy" / "config.json").read_text() == "{}"


def test_an_edited_model_file_is_refused_naming_it(tmp_path):
    entry = an_entry(tmp_path / "shared", tmp_path)
    (entry / "model" / "weights.bin").write_bytes(b"\x01\x03")
    with pytest.raises(SharedTuningError, match=r"weights\.bin: missing or not the file"):
        copy_tuning(entry, tmp_path / "copy")


def test_an_entry_under_another_name_is_refused(tmp_path):
    entry = an_entry(tmp_path / "shared", tmp_path)
    moved = entry.rename(entry.parent / ("0" * 64))
    with pytest.raises(SharedTuningError, match="names entry"):
        copy_tuning(moved, tmp_path / "copy")


def test_an_entry_without_its_record_is_refused(tmp_path):
    entry = an_entry(tmp_path / "shared", tmp_path)
    (entry / "tuning.json").unlink()
    with pytest.raises(SharedTuningError, match="not a shared tuning entry"):
        copy_tuning(entry, tmp_path / "copy")


LOCK_PROBE = (
    "import fcntl, os, sys\n"
    "d = os.open(sys.argv[1], os.O_RDWR)\n"
    "try:\n    fcntl.flock(d, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('took')\n"
    "except BlockingIOError:\n    print('held')\n"
)


def another_process_tries(lock: Path) -> str:
    """What another process gets when it tries the entry's lock without waiting."""
    probe = [sys.executable, "-c", LOCK_PROBE, str(lock)]
    return subprocess.run(probe, text=True, capture_output=True, check=True).stdout.strip()


def test_a_second_process_cannot_take_the_entry_while_one_holds_it(tmp_path):
    shared = tmp_path / "shared"
    with holding_entry(shared, "k"):
        held = another_process_tries(shared / ".k.lock")
    assert (held, another_process_tries(shared / ".k.lock")) == ("held", "took")


def test_a_second_data_root_copies_the_first_ones_tuning(tmp_path):
    shared = tmp_path / "shared"
    first = materialize_demo_model(
        tmp_path / "a" / "demo_base_model", statements(tmp_path / "a"), shared=shared, **TINY
    )
    second = materialize_demo_model(
        tmp_path / "b" / "demo_base_model", statements(tmp_path / "b"), shared=shared, **TINY
    )
    assert (
        first.manifest["shared_tuning"]["copied"],
        second.manifest["shared_tuning"]["copied"],
    ) == (
        False,
        True,
    )
    assert second.result == first.result
    assert model_files(second.folder) == model_files(first.folder)
    (entry,) = [p for p in shared.iterdir() if not p.name.startswith(".")]
    assert json.loads((entry / "tuning.json").read_text())["files"] == model_files(first.folder)


def test_other_statements_tune_again(tmp_path):
    shared = tmp_path / "shared"
    materialize_demo_model(
        tmp_path / "a" / "demo_base_model", statements(tmp_path / "a"), shared=shared, **TINY
    )
    other = tmp_path / "b" / "eval" / "problems.jsonl"
    other.parent.mkdir(parents=True)
    publish_records(other, [make_problem("p3", "theorem p3 : 2 = 2 := by sorry")])
    again = materialize_demo_model(
        tmp_path / "b" / "demo_base_model", [other], shared=shared, **TINY
    )
    assert again.manifest["shared_tuning"]["copied"] is False
    assert len([p for p in shared.iterdir() if not p.name.startswith(".")]) == 2


def test_a_tuning_runs_on_the_threads_it_is_given_and_records_them(tmp_path, monkeypatch):
    import torch

    from prover_assets.generation import stages

    before = torch.get_num_threads()
    given = 3 if before != 3 else 2
    tune = stages._tune_demo_model
    seen: list[int] = []
    monkeypatch.setattr(
        stages,
        "_tune_demo_model",
        lambda *args: seen.append(torch.get_num_threads()) or tune(*args),
    )
    shared = tmp_path / "shared"
    made = [
        materialize_demo_model(
            tmp_path / root / "demo_base_model",
            statements(tmp_path / root),
            shared=shared,
            cpu_threads=given,
            **TINY,
        )
        for root in ("a", "b")
    ]
    assert seen == [given]  # the second copied the first's tuning
    assert made[0].manifest["cpu_threads"] == given
    assert "cpu_threads" not in made[1].manifest
    assert torch.get_num_threads() == before


def test_without_a_shared_folder_each_data_root_tunes_its_own(tmp_path):
    made = materialize_demo_model(
        tmp_path / "a" / "demo_base_model", statements(tmp_path / "a"), **TINY
    )
    assert "shared_tuning" not in made.manifest
    assert os.listdir(tmp_path) == ["a"]  # nothing written beside the data root


def test_the_recipe_of_two_builds_of_one_seed_is_the_same(tmp_path):
    from prover_assets.demo.tiny_model import build_tiny_model, tuning_recipe

    twice = [
        tuning_recipe(
            build_tiny_model(tmp_path / name, hidden_size=16, layers=1, vocab_size=300, seed=3),
            ["theorem p : 1 = 1 := by sorry"],
        )
        for name in ("a", "b")
    ]
    # each build wrote its own random revision: the recipe leaves it out
    assert (tmp_path / "a" / "prover_assets_revision.json").read_bytes() != (
        tmp_path / "b" / "prover_assets_revision.json"
    ).read_bytes()
    assert twice[0] == twice[1]


def test_the_recipe_changes_with_the_statements_and_with_the_weights(tmp_path):
    from prover_assets.demo.tiny_model import build_tiny_model, tuning_recipe

    one = build_tiny_model(tmp_path / "a", hidden_size=16, layers=1, vocab_size=300, seed=3)
    other = build_tiny_model(tmp_path / "b", hidden_size=16, layers=1, vocab_size=300, seed=4)
    statement = ["theorem p : 1 = 1 := by sorry"]
    recipe = tuning_recipe(one, statement)
    assert recipe != tuning_recipe(one, ["theorem p : 2 = 2 := by sorry"])
    assert recipe != tuning_recipe(other, statement)


def test_a_tuning_of_another_recipe_is_not_copied(tmp_path, monkeypatch):
    from prover_assets.generation import stages

    shared = tmp_path / "shared"
    materialize_demo_model(
        tmp_path / "a" / "demo_base_model", statements(tmp_path / "a"), shared=shared, **TINY
    )
    monkeypatch.setattr(stages, "tuning_recipe", lambda folder, statements: "other code")
    again = materialize_demo_model(
        tmp_path / "b" / "demo_base_model", statements(tmp_path / "b"), shared=shared, **TINY
    )
    assert again.manifest["shared_tuning"]["copied"] is False
    recipes = sorted(
        json.loads((p / "tuning.json").read_text())["settings"]["recipe"]
        for p in shared.iterdir()
        if not p.name.startswith(".")
    )
    assert len(recipes) == 2 and "other code" in recipes


def data_root_tuned_from(tmp_path: Path, entry: Path) -> Path:
    root = tmp_path / "data"
    (root / "demo_base_model").mkdir(parents=True)
    manifest = {"shared_tuning": {"entry": str(entry), "copied": True}}
    (root / "demo_base_model" / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_the_suite_tells_a_shipped_tuning_from_a_stale_and_a_missing_one(tmp_path, monkeypatch):
    from prover_assets_tests import support

    shipped = an_entry(tmp_path / "shipped", tmp_path)  # settings TINY, inputs {"eval": "ab"}
    monkeypatch.setattr(support, "SHIPPED_TUNINGS", tmp_path / "shipped")
    model = tmp_path / "tuned"

    def published(inputs: dict, settings: dict) -> Path:
        entry = tmp_path / "session" / tuning_key(inputs, settings)
        publish_tuning(entry, model, inputs=inputs, settings=settings, result=RESULT)
        return entry

    other_recipe = published({"eval": "ab"}, {**TINY, "recipe": "other code"})
    other_statements = published({"eval": "cd"}, TINY)
    states = [
        support.shipped_tuning_state(data_root_tuned_from(tmp_path / name, entry))
        for name, entry in (("a", shipped), ("b", other_recipe), ("c", other_statements))
    ]
    assert states == ["shipped", "stale", "missing"]
