"""Children never outlive their run: killed with their parent, even in their own session and
when forked for a thread that has since ended; orphans ended by pid and start time only."""

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from prover_assets.children import (
    ChildRecord,
    FolderBusyError,
    children_dir,
    end_orphans,
    hold_folder,
    process_start_time,
    spawn_tied,
)


@pytest.fixture(autouse=True)
def registry(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PROVER_ASSETS_CHILDREN_DIR", str(tmp_path / "children"))
    return tmp_path / "children"


def alive(pid: int) -> bool:
    return process_start_time(pid) is not None


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def recorded_children(registry: Path) -> list[ChildRecord]:
    return [ChildRecord(**json.loads(p.read_text())) for p in sorted(registry.glob("*.json"))]


VERIFY_FOREVER = """
import sys
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.factories import make_generation, make_problem
from prover_assets_tests.lean_double import double_backend
from pathlib import Path
rules = [{"match": {"substring": "aesop"}, "action": "hang"}]
text = "```lean4\\ntheorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by\\n  aesop -- {}\\n```"
pairs = [(make_problem(), make_generation(sample_idx=i, completion_text=text.format(i))) for i in range(4)]
with double_backend(Path(sys.argv[1]), rules, workers=2) as backend:
    StrictVerifier(backend, VerifierPolicy(budget_s=3600.0, feedback=False)).verify_many(pairs)
"""


def test_kill_9_of_the_runs_process_group_leaves_no_repl_alive(tmp_path, registry):
    run = subprocess.Popen(
        [sys.executable, "-c", VERIFY_FOREVER, str(tmp_path / "repl")], start_new_session=True
    )
    # Two workers and the pool's warm spare (started when the first worker started).
    assert wait_until(lambda: len(recorded_children(registry)) == 3, timeout=60)
    repls = [r.child_pid for r in recorded_children(registry)]
    assert all(alive(pid) and os.getpgid(pid) == pid for pid in repls)  # own sessions
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert wait_until(lambda: not any(alive(pid) for pid in repls), timeout=5)


def test_a_child_forked_for_a_thread_that_ended_lives_while_its_process_does():
    children = []
    thread = threading.Thread(target=lambda: children.append(spawn_tied(["sleep", "30"])))
    thread.start()
    thread.join()
    (child,) = children
    time.sleep(0.5)
    try:
        assert child.poll() is None
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def test_orphans_are_ended_by_pid_and_start_time_and_live_parents_children_are_kept(registry):
    orphan = subprocess.Popen(["sleep", "30"], start_new_session=True)
    kept = subprocess.Popen(["sleep", "30"], start_new_session=True)
    registry.mkdir(parents=True, exist_ok=True)
    dead_parent = subprocess.Popen(["true"])
    dead_parent.wait()
    records = {
        "orphan": ChildRecord(
            dead_parent.pid, 1.0, orphan.pid, process_start_time(orphan.pid), ["sleep"]
        ),
        "kept": ChildRecord(
            os.getpid(),
            process_start_time(os.getpid()),
            kept.pid,
            process_start_time(kept.pid),
            ["sleep"],
        ),
        # A recorded pid now used by another process (started later): never touched.
        "reused": ChildRecord(
            dead_parent.pid, 1.0, kept.pid, process_start_time(kept.pid) - 3600, ["x"]
        ),
    }
    for name, record in records.items():
        (registry / f"{name}.json").write_text(json.dumps(record.__dict__))
    try:
        ended = end_orphans()
        assert [r.child_pid for r in ended] == [orphan.pid]
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert kept.poll() is None
        assert sorted(p.stem for p in registry.glob("*.json")) == ["kept"]
    finally:
        for process in (orphan, kept):
            process.kill()
            process.wait()


def test_a_second_holder_of_a_folder_waits_then_refuses_naming_the_first(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from prover_assets.children import hold_folder\n"
            "with hold_folder(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(30)",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "held\n"
    try:
        with (
            pytest.raises(FolderBusyError, match=f"pid {holder.pid}"),
            hold_folder(tmp_path / "out", wait_s=0.3),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    with hold_folder(tmp_path / "out", wait_s=5):  # the holder died: the lock went with it
        assert (tmp_path / "out" / ".lock").read_text().strip() == str(os.getpid())


def test_a_waited_child_leaves_no_record(registry):
    from prover_assets.children import forget_child

    child = spawn_tied(["true"])
    assert len(list(children_dir().glob("*.json"))) == 1
    child.wait()
    forget_child(child)
    assert list(registry.glob("*.json")) == []


def test_a_command_that_cannot_run_exits_127_with_the_reason_on_stderr(registry):
    child = spawn_tied(["/nonexistent/lake", "exe", "repl"], stderr=subprocess.PIPE)
    _, stderr = child.communicate(timeout=10)
    assert child.returncode == 127
    assert b"cannot run '/nonexistent/lake'" in stderr


def test_the_address_space_cap_is_the_childs_and_its_childrens_only(registry):
    show = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    grandchild = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {show!r}])"
    capped = spawn_tied(
        [sys.executable, "-c", grandchild], address_space_mb=512, stdout=subprocess.PIPE
    )
    free = spawn_tied([sys.executable, "-c", show], stdout=subprocess.PIPE)
    assert capped.communicate(timeout=30)[0].split() == [str(512 << 20).encode()]
    assert free.communicate(timeout=30)[0].split() == [
        str(resource.getrlimit(resource.RLIMIT_AS)[0]).encode()
    ]


SPAWN_MANY = """
from prover_assets.children import forget_child, spawn_tied
for _ in range(120):
    child = spawn_tied(["true"])
    child.wait()
    forget_child(child)
"""


@pytest.mark.slow
def test_a_reader_listing_the_registry_while_another_process_starts_children_never_sees_half_a_record(
    registry,
):
    writer = subprocess.Popen([sys.executable, "-c", SPAWN_MANY])
    torn, seen = [], 0
    while writer.poll() is None:
        for path in registry.glob("*.json"):
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue  # forgotten since listed
            seen += 1
            try:
                json.loads(text)
            except ValueError:
                torn.append(text)
    assert writer.returncode == 0
    assert seen > 0  # the reader did overlap the writer
    assert torn == []
