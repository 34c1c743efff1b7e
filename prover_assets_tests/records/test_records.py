"""The record contract, the strict JSONL store and the manifest."""

import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from prover_assets.records import (
    SAMPLING_FIELDS,
    Appender,
    DuplicateKeyError,
    Generation,
    OutputExistsError,
    ParentRef,
    Problem,
    RecordError,
    SamplingSettings,
    SftRow,
    Stage,
    Verification,
    build_manifest,
    follow_records,
    git_revision,
    publish_bytes,
    publish_folder,
    publish_records,
    read_manifest,
    read_records,
    sha256_text,
    whole_records,
    write_manifest,
)
from prover_assets_tests.factories import (
    STATEMENT,
    make_generation,
    make_problem,
    make_verification,
)

# --- record rules ------------------------------------------------------------------------


def test_length_finish_requires_completion_of_exactly_max_tokens():
    with pytest.raises(ValidationError, match="finish_reason 'length'"):
        make_generation(completion_ids=[1, 2], finish_reason="length", max_tokens=3, cap_tokens=3)
    assert make_generation(completion_ids=[1, 2, 3], finish_reason="length", cap_tokens=3)


def test_token_ids_must_be_non_negative_in_a_file_too(tmp_path):
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        make_generation(completion_ids=[1, -2])
    row = make_generation().model_dump(mode="json")
    row["prompt_ids"][0] = -1
    path = tmp_path / "generations.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(RecordError, match=r"generations\.jsonl:1.*prompt_ids"):
        read_records(path, Generation)


def test_max_tokens_may_not_exceed_cap():
    with pytest.raises(ValidationError, match="> cap_tokens"):
        make_generation(cap_tokens=8, max_tokens=9, context_clipped=False)


def test_completion_may_not_exceed_max_tokens():
    with pytest.raises(ValidationError, match="completion tokens >"):
        make_generation(completion_ids=[1, 2, 3, 4], cap_tokens=3)


def test_context_clipped_must_match_max_tokens_below_cap():
    with pytest.raises(ValidationError, match="context_clipped"):
        make_generation(cap_tokens=64, max_tokens=32, context_clipped=False)
    assert make_generation(cap_tokens=64, max_tokens=32).context_clipped


def test_no_room_exactly_when_max_tokens_is_zero():
    assert (
        make_generation(
            completion_ids=[], completion_text="", finish_reason="no_room", max_tokens=0
        ).finish_reason
        == "no_room"
    )
    with pytest.raises(ValidationError, match="no_room"):
        make_generation(completion_ids=[], finish_reason="stop", max_tokens=0)


def test_correction_must_have_parent_one_round_earlier_of_same_problem():
    with pytest.raises(ValidationError, match="parent"):
        make_generation(
            round=1, parent=ParentRef(problem_id="other", sample_idx=0, round=0, cap_tokens=64)
        )
    with pytest.raises(ValidationError, match="round 0"):
        make_generation(
            round=0, parent=ParentRef(problem_id="p1", sample_idx=0, round=0, cap_tokens=64)
        )


def test_strict_types_reject_coercion():
    with pytest.raises(ValidationError):
        make_generation(sample_idx="0")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        make_generation(context_clipped=0)  # type: ignore[arg-type]


def test_problem_hashes_must_match_its_statement():
    with pytest.raises(ValidationError, match="statement_sha"):
        make_problem(statement_sha="0" * 64)


def test_problem_statement_must_end_with_by_sorry():
    text = STATEMENT.replace(":= by sorry", ":= by\n  omega")
    with pytest.raises(ValidationError, match="by sorry"):
        make_problem(statement=text)


def test_verdict_accepted_iff_stage_accepted_and_no_reasons():
    with pytest.raises(ValidationError, match="accepted exactly"):
        make_verification(accepted=True, stage=Stage.TIMEOUT)
    rejected = make_verification(accepted=False).model_dump()
    with pytest.raises(ValidationError, match="reasons"):
        Verification(**{**rejected, "reasons": []})


def test_sft_row_lengths_must_add_up():
    with pytest.raises(ValidationError, match="prompt_len"):
        SftRow(
            input_ids=[1, 2, 3],
            prompt_len=1,
            kind="first",
            round=0,
            sample_idx=0,
            cap_tokens=8,
            n_completion=1,
            proof_sha="a" * 64,
            model_rev="r",
            problem_id="p",
        )


# --- the store -----------------------------------------------------------------------------


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def problem_line(problem_id: str = "p1") -> bytes:
    return make_problem(problem_id).model_dump_json().encode()


def test_reader_names_file_and_line_of_malformed_json(tmp_path):
    path = tmp_path / "problems.jsonl"
    write_lines(path, [problem_line("a"), b'{"problem_id": "b",', problem_line("c")])
    with pytest.raises(RecordError, match=r"problems\.jsonl:2: malformed JSON"):
        read_records(path, Problem)


def test_reader_names_field_of_wrong_type(tmp_path):
    path = tmp_path / "problems.jsonl"
    bad = json.loads(problem_line("a"))
    bad["split"] = 3
    write_lines(path, [json.dumps(bad).encode()])
    with pytest.raises(RecordError, match=r":1: invalid Problem: split"):
        read_records(path, Problem)


def test_reader_names_missing_field(tmp_path):
    path = tmp_path / "problems.jsonl"
    bad = json.loads(problem_line("a"))
    del bad["header"]
    write_lines(path, [json.dumps(bad).encode()])
    with pytest.raises(RecordError, match=r":1: invalid Problem: header: Field required"):
        read_records(path, Problem)


def test_reader_requires_schema_version(tmp_path):
    path = tmp_path / "problems.jsonl"
    bad = json.loads(problem_line("a"))
    del bad["schema_version"]
    write_lines(path, [json.dumps(bad).encode()])
    with pytest.raises(RecordError, match="schema_version"):
        read_records(path, Problem)


def test_reader_rejects_duplicate_keys(tmp_path):
    path = tmp_path / "problems.jsonl"
    write_lines(path, [problem_line("a"), problem_line("b"), problem_line("a")])
    with pytest.raises(DuplicateKeyError, match=rf"^{path}:3: duplicate key 'a'$"):
        read_records(path, Problem)


@pytest.mark.parametrize(
    ("second_line", "error"),
    [(b'{"problem_id": "\xff\xfe"}', "not UTF-8"), (b"  ", "empty line$")],
    ids=["non_utf8", "empty"],
)
def test_the_reader_names_a_bad_line_by_file_and_number(tmp_path, second_line, error):
    path = tmp_path / "problems.jsonl"
    write_lines(path, [problem_line("a"), second_line])
    with pytest.raises(RecordError, match=rf"^{path}:2: {error}"):
        read_records(path, Problem)


def test_strict_reader_refuses_a_torn_last_line(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_bytes(problem_line("a") + b"\n" + problem_line("b")[:20])
    with pytest.raises(RecordError, match=r":2: unterminated last line"):
        read_records(path, Problem)


def test_resume_drops_a_torn_last_line_and_counts_it(tmp_path, caplog):
    path = tmp_path / "problems.jsonl"
    path.write_bytes(problem_line("a") + b"\n" + problem_line("b")[:20])
    with Appender(path, Problem) as appender:
        assert appender.torn_dropped == 1
        assert set(appender.keys) == {"a"}
        appender.append(make_problem("b"))
    assert [p.problem_id for p in read_records(path, Problem)] == ["a", "b"]
    assert "dropping an unterminated last line" in caplog.text


def test_resume_still_raises_on_a_malformed_middle_line(tmp_path):
    path = tmp_path / "problems.jsonl"
    write_lines(path, [problem_line("a"), b"not json", problem_line("c")])
    with pytest.raises(RecordError, match=rf"^{path}:2: malformed JSON"):
        Appender(path, Problem)


def test_appending_a_present_key_raises_and_writes_nothing(tmp_path):
    path = tmp_path / "problems.jsonl"
    with Appender(path, Problem) as appender:
        appender.append(make_problem("a"))
        with pytest.raises(DuplicateKeyError):
            appender.append_many([make_problem("b"), make_problem("a")])
    assert [p.problem_id for p in read_records(path, Problem)] == ["a"]


def test_records_round_trip_through_the_store(tmp_path):
    generation = make_generation(round=1)
    verdict = make_verification(generation)
    for record, model in ((generation, Generation), (verdict, Verification)):
        path = tmp_path / f"{model.__name__}.jsonl"
        with Appender(path, model) as appender:
            appender.append(record)
        assert read_records(path, model) == [record]


def test_killed_appender_loses_at_most_the_torn_line(tmp_path):
    """A writer killed with SIGKILL mid-stream leaves a file that resumes cleanly."""
    path = tmp_path / "problems.jsonl"
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from prover_assets.records import Appender, Problem
from prover_assets_tests.factories import make_problem
appender = Appender({str(path)!r}, Problem)
for i in range(40):
    appender.append(make_problem(f"p{{i}}"))
# a torn write, then death
appender._handle.write(make_problem("torn").model_dump_json().encode()[:30]); appender._handle.flush()
os.kill(os.getpid(), 9)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert result.returncode == -9
    with Appender(path, Problem) as appender:
        assert appender.torn_dropped == 1
        assert len(appender.keys) == 40


def test_publish_is_atomic_and_leaves_no_temp_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    publish_bytes(target, b"first")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        publish_bytes(target, b"second")
    assert target.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def _disk_full(fd):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as fsync reports it: no file named


def test_a_full_disk_while_publishing_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    publish_bytes(target, b"first")
    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(OSError) as refused:
        publish_bytes(target, b"second")
    assert (refused.value.errno, refused.value.filename) == (errno.ENOSPC, str(target))
    assert str(refused.value) == f"[Errno 28] No space left on device: '{target}'"
    assert target.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_full_disk_while_appending_names_the_stream(tmp_path, monkeypatch):
    path = tmp_path / "problems.jsonl"
    with Appender(path, Problem) as appender:
        appender.append(make_problem("a"))
        monkeypatch.setattr(os, "fsync", _disk_full)
        with pytest.raises(OSError) as refused:
            appender.append(make_problem("b"))
    assert (refused.value.errno, refused.value.filename) == (errno.ENOSPC, str(path))
    assert "a" in appender.keys and "b" not in appender.keys  # not counted as written


def test_publish_folder_refuses_to_overwrite(tmp_path):
    destination = tmp_path / "report"
    with publish_folder(destination) as staging:
        (staging / "a.txt").write_text("a")
    assert (destination / "a.txt").read_text() == "a"
    with pytest.raises(OutputExistsError), publish_folder(destination):
        pass


def test_publish_folder_failure_leaves_nothing(tmp_path):
    destination = tmp_path / "report"
    with pytest.raises(RuntimeError), publish_folder(destination) as staging:
        (staging / "a.txt").write_text("a")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


# --- the manifest --------------------------------------------------------------------------


def test_manifest_records_inputs_outputs_and_real_git_commit(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hello")
    output = tmp_path / "out.txt"
    output.write_text("world")
    manifest = build_manifest(
        folder=tmp_path,
        asset="x",
        inputs=[source],
        outputs=[output],
        config={"k": 1},
        counts={"n": 2},
        started_at="2026-01-01T00:00:00+00:00",
    )
    write_manifest(tmp_path, manifest)
    read = read_manifest(tmp_path)
    stat = os.stat(source)
    stamp = {"size": 5, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino}
    assert read["inputs"] == [
        {"path": str(source), "sha256": sha256_text("hello"), "bytes": 5, "stamp": stamp}
    ]
    assert read["outputs"][0]["sha256"] == sha256_text("world")
    expected = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
    )
    if expected.returncode == 0:
        assert read["code"]["commit"] == expected.stdout.strip()
        assert read["code"]["dirty"] in (True, False)
    else:
        assert read["code"]["commit"] is None
        assert read["code"]["reason"]


def test_git_revision_outside_a_repository_is_unknown_not_made_up(tmp_path):
    revision = git_revision.__wrapped__(str(tmp_path))
    assert revision.commit is None
    assert revision.dirty is None
    assert revision.reason


def _dead_pid() -> int:
    import subprocess

    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_next_publish_removes_staging_left_by_a_killed_writer_and_keeps_a_live_ones(tmp_path):
    import os

    from prover_assets.records import publish_folder

    dead = tmp_path / f".report.staging-{_dead_pid()}-abc123"
    live = tmp_path / f".report.staging-{os.getpid()}-def456"
    other = tmp_path / f".other.staging-{_dead_pid()}-ghi789"
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "weights.bin").write_bytes(b"x" * 1024)
    with publish_folder(tmp_path / "report") as staging:
        (staging / "report.md").write_text("done")
    assert not dead.exists()
    assert live.exists() and other.exists()  # a live writer's, and another output's
    assert (tmp_path / "report" / "report.md").read_text() == "done"


def test_a_sweep_removes_every_dead_writers_temporary_under_the_root_and_says_what(tmp_path):
    from prover_assets.records import remove_debris

    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    tmp_file = nested / f".verdicts.jsonl.{_dead_pid()}-x1y2.tmp"
    tmp_file.write_bytes(b"partial")
    staging = tmp_path / f".sft_checkpoint.staging-{_dead_pid()}-q"
    staging.mkdir()
    keep = nested / ".lock"
    keep.write_text("1")
    removed = remove_debris(tmp_path, recursive=True)
    assert sorted((r.path, r.size_bytes) for r in removed) == sorted([(tmp_file, 7), (staging, 0)])
    assert keep.exists() and not tmp_file.exists() and not staging.exists()


def test_a_record_error_names_the_first_five_fields_at_fault_by_their_path(tmp_path):
    row = json.loads(problem_line())
    for name in ("problem_id", "source", "split", "formal_statement", "informal_prefix", "header"):
        row[name] = 7
    path = tmp_path / "problems.jsonl"
    path.write_text(problem_line().decode() + "\n" + json.dumps(row) + "\n")
    with pytest.raises(RecordError) as error:
        read_records(path, Problem)
    message = str(error.value)
    assert message.startswith(f"{path}:2: invalid Problem: ")
    parts = message.removeprefix(f"{path}:2: invalid Problem: ").split("; ")
    assert [part.split(":")[0] for part in parts] == [
        "problem_id",
        "source",
        "split",
        "formal_statement",
        "informal_prefix",
    ]


def test_a_nested_field_at_fault_is_named_by_its_dotted_path(tmp_path):
    row = json.loads(make_generation().model_dump_json())
    row["sampling"]["top_p"] = "high"
    path = tmp_path / "generations.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(RecordError, match=rf"^{path}:1: invalid Generation: sampling\.top_p: "):
        read_records(path, Generation)


def test_a_rule_of_the_whole_record_is_named_as_the_records(tmp_path):
    row = json.loads(make_generation(finish_reason="stop").model_dump_json())
    row["finish_reason"] = "no_room"
    path = tmp_path / "generations.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(
        RecordError,
        match=rf"^{path}:1: invalid Generation: record: Value error, finish_reason 'no_room'",
    ):
        read_records(path, Generation)


def test_a_published_record_file_is_one_json_line_per_record(tmp_path):
    records = [make_problem("a"), make_problem("b")]
    path = tmp_path / "nested" / "deeper" / "problems.jsonl"
    assert publish_records(path, records) == 2
    expected = "".join(r.model_dump_json() + "\n" for r in records).encode("utf-8")
    assert path.read_bytes() == expected
    assert read_records(path, Problem) == records
    assert sorted(p.name for p in path.parent.iterdir()) == ["problems.jsonl"]


def test_the_errors_of_a_stream_name_the_file_and_line(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_bytes(problem_line("a") + b"\n" + problem_line("b")[:20])
    with pytest.raises(RecordError) as torn:
        read_records(path, Problem)
    assert str(torn.value) == (
        f"{path}:2: unterminated last line (a writer crashed mid-write); reopen the stream for "
        "resume to drop it"
    )
    write_lines(path, [problem_line("a"), problem_line("a")])
    with pytest.raises(DuplicateKeyError, match=rf"^{path}:2: duplicate key 'a'$"):
        Appender(path, Problem)
    row = json.loads(problem_line("a"))
    del row["schema_version"]
    write_lines(path, [json.dumps(row).encode()])
    with pytest.raises(RecordError, match=rf"^{path}:1: missing field schema_version$"):
        read_records(path, Problem)
    write_lines(path, [b'{"problem_id": "\xff"}'])
    with pytest.raises(RecordError, match=rf"^{path}:1: not UTF-8"):
        read_records(path, Problem)


def test_a_reader_with_its_own_key_finds_duplicates_of_that_key(tmp_path):
    path = tmp_path / "problems.jsonl"
    write_lines(path, [problem_line("a"), problem_line("b")])
    same_source = [p.problem_id for p in read_records(path, Problem, key=lambda p: p.problem_id)]
    assert same_source == ["a", "b"]
    with pytest.raises(DuplicateKeyError, match=":2: duplicate key 'test'"):
        read_records(path, Problem, key=lambda p: p.source)


def test_an_appender_knows_each_keys_line_and_names_it_on_a_repeat(tmp_path):
    path = tmp_path / "deep" / "er" / "problems.jsonl"
    with Appender(path, Problem) as appender:
        assert (appender.torn_dropped, "a" in appender) == (0, False)
        appender.append_many([make_problem("a"), make_problem("b")])
        appender.append(make_problem("c"))
        assert appender.keys == {"a": 1, "b": 2, "c": 3}
        assert "a" in appender and "z" not in appender
        assert appender.append_many([]) == 0
        with pytest.raises(DuplicateKeyError, match=rf"^{path}:0: key 'e' is already present$"):
            appender.append_many([make_problem("e"), make_problem("e")])
    with Appender(path, Problem) as reopened:
        assert reopened.keys == {"a": 1, "b": 2, "c": 3}
        with pytest.raises(DuplicateKeyError, match=rf"^{path}:2: key 'b' is already present$"):
            reopened.append(make_problem("b"))
        reopened.append(make_problem("d"))
    assert [p.problem_id for p in read_records(path, Problem)] == ["a", "b", "c", "d"]


def test_a_torn_line_after_several_is_cut_at_the_last_whole_line(tmp_path, caplog):
    path = tmp_path / "problems.jsonl"
    whole = b"".join(problem_line(p) + b"\n" for p in ("a", "b", "c"))
    path.write_bytes(whole + problem_line("d")[:25])
    with Appender(path, Problem) as appender:
        assert appender.torn_dropped == 1
    assert path.read_bytes() == whole
    assert (
        f"{path}:4: dropping an unterminated last line of 25 bytes (a writer crashed mid-write)"
        in caplog.text
    )


def test_a_publish_removes_only_its_own_files_dead_temporaries(tmp_path, caplog):
    target = tmp_path / "out.json"
    dead = _dead_pid()
    own = tmp_path / f".out.json.{dead}-abc.tmp"
    other = tmp_path / f".other.json.{dead}-abc.tmp"
    for path in (own, other):
        path.write_bytes(b"partial")
    publish_bytes(target, b"data")
    assert not own.exists() and other.exists()
    assert target.read_bytes() == b"data"
    assert f"removed {own}, left by an interrupted publish" in caplog.text


def test_a_killed_publish_leaves_a_temporary_the_next_one_finds(tmp_path):
    target = tmp_path / "out.json"
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from prover_assets.records import publish_bytes
os.replace = lambda *_: os.kill(os.getpid(), 9)
publish_bytes({str(target)!r}, b"data")
"""
    assert subprocess.run([sys.executable, "-c", script]).returncode == -9
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(".out.json.") and left.name.endswith(".tmp")
    publish_bytes(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_debris_in_a_subfolder_is_swept_only_when_asked(tmp_path):
    from prover_assets.records import remove_debris

    nested = tmp_path / "sub"
    nested.mkdir()
    staging = nested / f".model.staging-{_dead_pid()}-q"
    staging.mkdir()
    (staging / "inner").mkdir()
    (staging / "inner" / "weights.bin").write_bytes(b"x")
    assert remove_debris(tmp_path) == []
    assert [(r.path, r.size_bytes) for r in remove_debris(tmp_path, recursive=True)] == [
        (staging, 1)
    ]
    assert not staging.exists()


def test_following_a_growing_stream_yields_each_whole_line_once_and_waits_for_a_torn_one(tmp_path):
    path = tmp_path / "gen.jsonl"
    rows = [make_generation(sample_idx=i) for i in range(3)]
    lines = [row.model_dump_json().encode() + b"\n" for row in rows]
    stop = threading.Event()
    seen: list[int] = []
    path.write_bytes(lines[0] + lines[1][:10])  # the second line is still being written

    def follow() -> None:
        seen.extend(g.sample_idx for g in follow_records(path, Generation, stop, poll_s=0.01))

    follower = threading.Thread(target=follow)
    follower.start()
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [0]
    with open(path, "ab") as handle:
        handle.write(lines[1][10:] + lines[2])
    stop.set()  # set at once: what landed before it is still read
    follower.join(5)
    assert seen == [0, 1, 2]


def test_whole_records_reads_every_whole_line_now_and_not_a_torn_last_one(tmp_path):
    path = tmp_path / "gen.jsonl"
    rows = [make_generation(sample_idx=i) for i in range(3)]
    lines = [row.model_dump_json().encode() + b"\n" for row in rows]
    path.write_bytes(lines[0] + lines[1] + lines[2][:10])  # the third is still being written
    assert [g.sample_idx for g in whole_records(path, Generation)] == [0, 1]
    by_problem = whole_records(path, Generation, key=lambda g: g.problem_id)
    with pytest.raises(DuplicateKeyError, match=r"gen\.jsonl:2: "):
        list(by_problem)  # one problem's two samples: the key given is the one checked


def test_following_a_stream_raises_on_a_bad_line_with_its_number(tmp_path):
    path = tmp_path / "gen.jsonl"
    path.write_bytes(make_generation().model_dump_json().encode() + b"\n{broken\n")
    stop = threading.Event()
    stop.set()
    with pytest.raises(RecordError, match=r"gen.jsonl:2: malformed JSON"):
        list(follow_records(path, Generation, stop))


def test_following_reads_each_of_several_appends_once_and_ends_when_stopped(tmp_path):
    path = tmp_path / "gen.jsonl"
    lines = [make_generation(sample_idx=i).model_dump_json().encode() + b"\n" for i in range(4)]
    path.write_bytes(lines[0])
    stop = threading.Event()
    seen: list[int] = []
    follower = threading.Thread(
        target=lambda: seen.extend(
            g.sample_idx for g in follow_records(path, Generation, stop, poll_s=0.01)
        ),
        daemon=True,  # a follower that never ends fails the test, not the process
    )
    follower.start()
    read_before_the_next = []
    try:
        for count, line in enumerate(lines[1:], start=1):
            deadline = time.monotonic() + 5
            while len(seen) < count and time.monotonic() < deadline:
                time.sleep(0.01)
            read_before_the_next.append(len(seen))
            with open(path, "ab") as handle:
                handle.write(line)
    finally:
        stop.set()
    follower.join(5)
    assert not follower.is_alive()
    assert read_before_the_next == [1, 2, 3]  # each append read while the stream still grows
    assert seen == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("second_line", "error", "message"),
    [
        (b"  \n", RecordError, "empty line"),
        (None, DuplicateKeyError, "duplicate key ('p1', 0, 0, 64)"),
    ],
    ids=["empty", "duplicate"],
)
def test_following_refuses_a_bad_line_naming_its_file_and_line(
    tmp_path, second_line, error, message
):
    path = tmp_path / "gen.jsonl"
    first = make_generation().model_dump_json().encode() + b"\n"
    path.write_bytes(first + (second_line if second_line is not None else first))
    stop = threading.Event()
    stop.set()
    with pytest.raises(error) as raised:
        list(follow_records(path, Generation, stop))
    assert str(raised.value) == f"{path}:2: {message}"


def test_following_a_stream_many_reads_long_yields_every_record_once(tmp_path, monkeypatch):
    from prover_assets.records import store

    monkeypatch.setattr(store, "_FOLLOW_READ", 100)  # a few reads per line
    path = tmp_path / "gen.jsonl"
    publish_records(path, [make_generation(sample_idx=i) for i in range(6)])
    stop = threading.Event()
    stop.set()  # what is there now is read, then it ends
    assert [g.sample_idx for g in follow_records(path, Generation, stop)] == list(range(6))


RECHECK_OF = {  # the first attempt's stage -> what `_with_both_attempts` records
    stage: {
        "first": {"stage": stage, "verify_s": 180.0},
        "second": {"stage": Stage.ACCEPTED, "verify_s": 2.0},
    }
    for stage in (Stage.TIMEOUT, Stage.COMPILE_ERROR)
}


@pytest.mark.parametrize(
    ("stage", "diagnostics", "timed_out"),
    [
        (Stage.TIMEOUT, {}, True),  # a timeout, not re-checked
        (Stage.ACCEPTED, {"timeout_recheck": RECHECK_OF[Stage.TIMEOUT]}, True),  # passed it
        (Stage.ACCEPTED, {"timeout_recheck": RECHECK_OF[Stage.COMPILE_ERROR]}, False),
        (Stage.ACCEPTED, {}, False),
    ],
)
def test_a_verdict_says_whether_its_first_attempt_timed_out(stage, diagnostics, timed_out):
    accepted = stage is Stage.ACCEPTED
    verdict = make_verification(
        accepted=accepted,
        stage=stage,
        reasons=None if accepted else ["timeout"],
        diagnostics=diagnostics,
    )
    assert verdict.first_attempt_timed_out is timed_out


@pytest.mark.parametrize(
    ("diagnostics", "faithful"),
    [
        ({"displayed_statement_faithful": True}, True),
        ({"displayed_statement_faithful": False}, False),
        ({}, None),  # not recorded
    ],
)
def test_a_verdict_says_whether_its_displayed_theorem_is_the_problems(diagnostics, faithful):
    assert make_verification(diagnostics=diagnostics).displayed_statement_faithful is faithful


@pytest.mark.parametrize(
    "diagnostics",
    [
        {"timeout_recheck": "garbled"},
        {"displayed_statement_faithful": "yes"},  # not a reading
        {"timeout_recheck": {"first": {"stage": "timeout", "verify_s": 1.0}}},  # no second
        {"worker": -1},
        {"something_else": 1},  # a note no verifier writes
    ],
)
def test_a_verdict_whose_diagnostics_are_not_the_verifiers_is_refused(diagnostics):
    with pytest.raises(ValidationError):
        make_verification(diagnostics=diagnostics)


def test_a_verdicts_diagnostics_are_written_where_they_apply_and_read_back_typed(tmp_path):
    verdict = make_verification(
        diagnostics={"displayed_statement_faithful": False, "attempts": 2, "axioms": ["propext"]}
    )
    written = json.loads(verdict.model_dump_json())["diagnostics"]
    assert written == {"displayed_statement_faithful": False, "attempts": 2, "axioms": ["propext"]}
    path = tmp_path / "verdicts.jsonl"
    path.write_text(verdict.model_dump_json() + "\n")
    (read,) = read_records(path, Verification)
    assert read == verdict and read.diagnostics.attempts == 2


# --- sampling ------------------------------------------------------------------------------


def test_sampling_settings_carry_every_recorded_field_by_its_record_name():
    settings = SamplingSettings(
        temperature=0.6,
        top_p=0.95,
        top_k=20,
        min_p=0.05,
        repetition_penalty=1.1,
        presence_penalty=0.2,
        frequency_penalty=0.3,
    )
    assert settings.carried() == {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 20,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "presence_penalty": 0.2,
        "frequency_penalty": 0.3,
    }
    assert tuple(settings.carried()) == SAMPLING_FIELDS


def test_settings_that_name_a_field_the_record_does_not_are_refused():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class WithSeed(SamplingSettings):
        seed: int = 0  # a sampling field the records do not carry

    with pytest.raises(TypeError) as refused:
        WithSeed(temperature=1.0, top_p=1.0, top_k=0)
    assert str(refused.value) == "SamplingSettings must name exactly the recorded sampling fields"


def test_sampling_settings_default_to_the_neutral_values():
    settings = SamplingSettings(temperature=1.0, top_p=1.0, top_k=0)
    assert (settings.min_p, settings.repetition_penalty) == (0.0, 1.0)
    assert (settings.presence_penalty, settings.frequency_penalty) == (0.0, 0.0)
