"""A step's usage is the kernel's count: the CPU seconds its own process spent and those of
its children (the REPLs, the trainer), waited for or still running, measured against processes
that burn a known amount of CPU and say how much; and a streamed step's attempt journal, which
outlives an attempt killed with kill -9."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from prover_assets.records import usage
from prover_assets.records.outputs import Step, StepInputs
from prover_assets.records.usage import (
    AttemptJournal,
    AttemptUsage,
    GpuMemoryPeak,
    UsageMark,
    _stat_cpu_s,
    _unread,
    earlier_attempts,
    gpu_memory_used_mib,
    live_descendants_cpu_s,
    usage_since,
)
from prover_assets.verify.stages import StatementAuditResult
from prover_assets_tests.support import ROOT

# A child that burns CPU until its own clock says `seconds`, then prints what it spent.
BURN = """
import sys, time
start = time.process_time()
while time.process_time() - start < float(sys.argv[1]):
    pass
print(time.process_time())
"""


def burn_in_a_child(seconds: float) -> float:
    done = subprocess.run(
        [sys.executable, "-c", BURN, str(seconds)], capture_output=True, text=True, check=True
    )
    return float(done.stdout)  # the child's own CPU time, start-up included


def burn_here(seconds: float) -> float:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return time.process_time() - start


def test_the_cpu_of_a_child_waited_for_is_counted_as_the_child_counts_it():
    before = time.monotonic()
    mark = UsageMark.now()
    spent = burn_in_a_child(0.4) + burn_in_a_child(0.3)
    usage = usage_since(mark)
    assert usage.children_cpu_s == pytest.approx(spent, abs=0.05)
    assert 0.7 <= usage.wall_s <= time.monotonic() - before + 0.001  # since the mark, to the ms


def test_the_steps_own_cpu_is_counted_apart_from_its_childrens():
    mark = UsageMark.now()
    spent = burn_here(0.3)
    usage = usage_since(mark)
    assert usage.cpu_s == pytest.approx(spent, abs=0.05)
    assert usage.children_cpu_s < 0.05


def test_every_steps_manifest_records_what_its_attempt_used(tmp_path):
    step = Step(tmp_path, "asset", StatementAuditResult, StepInputs.hash({}), {})
    spent = burn_in_a_child(0.2)
    result = StatementAuditResult(problems=0, checks=0, statuses={}, found={}, simulated=True)
    step.finish(result, [])
    usage = json.loads((tmp_path / "manifest.json").read_text())["usage"]
    assert usage["children_cpu_s"] == pytest.approx(spent, abs=0.05)
    assert usage["wall_s"] >= usage["children_cpu_s"] - 0.05


# Burns user time (the sums) and system time (each `os.urandom` is a system call) until its own
# clock says 0.2 s.
SPEND = """
import os, time
start = time.process_time()
while time.process_time() - start < 0.2:
    os.urandom(1 << 18)
    sum(range(20000))
"""
# A child of a tree: renames itself (its name, in /proc/<pid>/stat, may hold parentheses and
# spaces), waits for a grandchild that spends CPU, spends its own, then says its pid and what
# it and its waited-for children spent (the kernel's counts, as /proc/<pid>/stat holds them),
# and stays alive until its stdin closes.
TREE_CHILD = """
import os, resource, subprocess, sys
with open("/proc/self/comm", "w") as comm:
    comm.write(sys.argv[1])
subprocess.run([sys.executable, "-c", sys.argv[2]], check=True)
exec(sys.argv[2])
own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
spent = own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime
print(os.getpid(), spent, min(waited.ru_utime, waited.ru_stime), flush=True)
sys.stdin.read()
"""
# The root of a tree of its own: two children, siblings, each a TREE_CHILD; it says what each
# said, and waits, alive, until its stdin closes (then its children's stdin closes too).
TREE_ROOT = """
import subprocess, sys
children = [
    subprocess.Popen([sys.executable, "-c", sys.argv[1], name, sys.argv[2]],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for name in ("a) 1 2 (b", "plain")
]
for child in children:
    print(child.stdout.readline().strip(), flush=True)
sys.stdin.read()
for child in children:
    child.stdin.close()
    child.wait()
"""


@contextlib.contextmanager
def live_tree() -> Iterator[tuple[int, list[tuple[int, float, float]]]]:
    """A live tree (root, two children, each with a grandchild it waited for): the root's pid
    and each child's (pid, CPU spent with its waited grandchild's, the least of its
    grandchild's user and system time)."""
    root = subprocess.Popen(
        [sys.executable, "-c", TREE_ROOT, TREE_CHILD, SPEND],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        children = []
        for _ in range(2):
            pid, spent, grandchild_system = root.stdout.readline().split()
            children.append((int(pid), float(spent), float(grandchild_system)))
        yield root.pid, children
    finally:
        root.stdin.close()
        root.wait()


@pytest.fixture(scope="module")
def tree():
    """One live tree for the tests that read it while it lives (each only reads it)."""
    with live_tree() as (root, children):
        yield root, children


def test_the_live_descendants_cpu_is_read_from_the_process_tree(tree):
    # the root's two children each spent CPU and waited for a grandchild that spent some:
    # alive, none was waited for by the root
    root, children = tree
    # what each waited for spent user and system time: its cutime and cstime count here
    assert all(least > 0.02 for *_, least in children)
    spent = sum(cpu for _, cpu, _ in children)
    assert live_descendants_cpu_s(root) == pytest.approx(spent, abs=0.1)
    # one child left out, with what it waited for: the other alone
    (first, _, _), (_, second_spent, _) = children
    only_second = live_descendants_cpu_s(root, skip=frozenset({first}))
    assert only_second == pytest.approx(second_spent, abs=0.05)
    # this process's descendants: the root and its tree, and whatever else this test process
    # started earlier and keeps
    assert live_descendants_cpu_s() >= spent - 0.1


def test_a_process_whose_name_holds_parentheses_is_read_from_its_stat(tree):
    root, ((renamed, spent, _), _) = tree  # the first child is named "a) 1 2 (b"
    # /proc counts in clock ticks (10 ms), four fields: within 0.05 s of getrusage's count
    assert _stat_cpu_s(renamed) == (root, pytest.approx(spent, abs=0.05))
    assert live_descendants_cpu_s(renamed) == 0.0  # its grandchild ended, waited for


def test_a_process_that_is_gone_has_no_stat():
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    assert _stat_cpu_s(int(gone.stdout)) is None


def high_water_mark_mib() -> float:
    """This process's peak resident memory as /proc says it (VmHWM, KiB), in MiB."""
    status = Path("/proc/self/status").read_text().splitlines()
    return int(next(line for line in status if line.startswith("VmHWM:")).split()[1]) / 1024


def test_a_steps_peak_memory_is_its_processes_high_water_mark():
    mark = UsageMark.now()
    done = subprocess.run(
        [sys.executable, "-c", ALLOCATE], capture_output=True, text=True, check=True
    )
    child_peak_mib = int(done.stdout) / 1024
    usage = usage_since(mark)
    # in MiB, as the kernel's other count of it says (getrusage's and /proc's differ by a few
    # hundred KiB: the two are updated at different times)
    assert usage.peak_rss_mib == pytest.approx(high_water_mark_mib(), abs=1.0)
    # the largest child this process waited for, over its life: at least this one
    assert usage.children_peak_rss_mib >= child_peak_mib - 0.05


# A child that holds 64 MiB, touched, and says its peak resident memory in KiB (VmHWM).
ALLOCATE = """
held = bytearray(64 << 20)
for i in range(0, len(held), 4096):
    held[i] = 1
print(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
"""


# An attempt of a streamed step that burns CPU inside its usage journal until it is killed.
KILLED_ATTEMPT = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from prover_assets.records import usage
from prover_assets.records.outputs import Step, StepInputs
from prover_assets.verify.stages import StatementAuditResult
from prover_assets_tests.support import ROOT
step = Step(Path({folder!r}), "asset", StatementAuditResult, StepInputs.hash({{}}), {{}})
with step.journaled(every_s=0.05):
    while True:
        pass
"""


def journal_cpu_s(folder) -> float:
    records = list((folder / "usage").glob("*.json"))
    if not records:
        return 0.0
    (record,) = records
    return AttemptUsage.model_validate_json(record.read_text()).usage.cpu_s


@pytest.mark.slow  # about 2 s: a process killed mid-attempt
def test_a_killed_attempts_last_record_is_listed_by_the_attempt_that_completes(tmp_path):
    script = KILLED_ATTEMPT.format(root=str(ROOT), folder=str(tmp_path))
    killed = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 120  # a bound on a hung child, not a speed
        while journal_cpu_s(tmp_path) < 0.3:
            assert killed.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:  # killed whatever happened: it would burn a core for ever
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    last = journal_cpu_s(tmp_path)
    step = Step(tmp_path, "asset", StatementAuditResult, StepInputs.hash({}), {})
    with step.journaled():
        burn_here(0.1)
    result = StatementAuditResult(problems=0, checks=0, statuses={}, found={}, simulated=True)
    step.finish(result, [])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (earlier,) = manifest["earlier_attempts"]
    assert earlier["ended"] is None  # killed: no end recorded
    assert earlier["usage"]["cpu_s"] == last >= 0.3
    assert earlier["attempt"].endswith(f"-{killed.pid}")
    assert manifest["usage"]["cpu_s"] == pytest.approx(0.1, abs=0.05)  # the completing one's


def test_an_attempt_that_raised_records_that_it_failed(tmp_path):
    step = Step(tmp_path, "asset", StatementAuditResult, StepInputs.hash({}), {})
    with pytest.raises(RuntimeError), step.journaled():
        burn_here(0.1)
        raise RuntimeError("the engine died")
    (record,) = (tmp_path / "usage").glob("*.json")
    entry = AttemptUsage.model_validate_json(record.read_text())
    assert (entry.attempt, entry.ended) == (step.attempt, "failed")
    assert entry.usage.cpu_s >= 0.1
    assert earlier_attempts(tmp_path, "another") == [entry]
    assert earlier_attempts(tmp_path, step.attempt) == []


def test_a_torn_journal_record_is_refused_naming_its_file(tmp_path):
    (tmp_path / "usage").mkdir()
    (tmp_path / "usage" / "1-2.json").write_text('{"attempt": "1-2"')
    with pytest.raises(ValueError, match=r"usage/1-2.json:1: not an attempt's usage record"):
        earlier_attempts(tmp_path, "3-4")


def test_a_journal_records_its_own_live_children_while_it_runs_and_none_once_it_ended(
    tmp_path, tree
):
    # `tree` was running before the attempt began: not its children, however they spend
    journal = AttemptJournal(tmp_path, "1-2", UsageMark.now())
    with live_tree() as (_, children):  # the attempt's own
        spent = sum(cpu for _, cpu, _ in children)
        assert usage_since(journal.mark).children_cpu_s < 0.05  # none ended: getrusage has none
        journal.record()  # running: what its live children spent so far counts
        running = AttemptUsage.model_validate_json(journal.path.read_text())
        journal.record("completed")  # an ended attempt's children were waited for
        ended = AttemptUsage.model_validate_json(journal.path.read_text())
    assert running.ended is None
    assert running.usage.children_cpu_s == pytest.approx(spent, abs=0.15)
    assert ended.ended == "completed" and ended.usage.children_cpu_s < 0.05


def test_an_attempts_first_record_makes_the_steps_folder_and_says_when(tmp_path):
    # the verdict step's journal starts before its stream makes the folder
    journal = AttemptJournal(tmp_path / "verdicts" / "pool", "1-2", UsageMark.now())
    journal.record()
    entry = AttemptUsage.model_validate_json(journal.path.read_text())
    assert journal.path == tmp_path / "verdicts" / "pool" / "usage" / "1-2.json"
    assert entry.recorded_at == pytest.approx(time.time(), abs=5)


def test_earlier_attempts_come_in_the_order_they_were_recorded(tmp_path):
    usage = {"wall_s": 1.0, "cpu_s": 1.0, "children_cpu_s": 0.0}
    (tmp_path / "usage").mkdir()
    for attempt, at in (("1-9", 30.0), ("2-9", 10.0), ("3-9", 20.0)):
        entry = {"attempt": attempt, "ended": None, "recorded_at": at, "usage": usage}
        (tmp_path / "usage" / f"{attempt}.json").write_text(json.dumps(entry))
    assert [a.attempt for a in earlier_attempts(tmp_path, "4-9")] == ["2-9", "3-9", "1-9"]


# nvidia-smi as the driver's tool answers the query `gpu_memory_used_mib` makes (one line a GPU:
# index, UUID, MiB in use, comma and space apart, no header, no units), from `readings.csv`
# beside it; any other query it refuses, exit 2, as nvidia-smi refuses a field it lacks.
NVIDIA_SMI = """#!/bin/sh
if [ "$*" != "--query-gpu=index,uuid,memory.used --format=csv,noheader,nounits" ]; then
    echo "Field \\"$1\\" is not a valid field to query." >&2
    exit 2
fi
if [ -f "$(dirname "$0")/hang" ]; then
    exec sleep 60
fi
if [ -f "$(dirname "$0")/no-driver" ]; then
    echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    exit 9
fi
cat "$(dirname "$0")/readings.csv"
"""


class FakeGpus:
    """The GPUs nvidia-smi reads: `set(mib, ...)` puts each GPU's memory in use."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()
        (folder / "nvidia-smi").write_text(NVIDIA_SMI)
        (folder / "nvidia-smi").chmod(0o755)

    def set(self, *mib: float) -> None:
        lines = [f"{i}, GPU-{i}aaaa-bbbb, {m:g}\n" for i, m in enumerate(mib)]
        (self.folder / "readings.csv").write_text("".join(lines))

    def lose_the_driver(self) -> None:
        (self.folder / "no-driver").touch()

    def hang(self) -> None:
        (self.folder / "hang").touch()


@pytest.fixture
def gpus(tmp_path, monkeypatch) -> FakeGpus:
    _unread.cache_clear()  # each test's failures said anew
    fake = FakeGpus(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.folder}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_gpu_memory_is_read_on_the_gpus_cuda_lets_the_step_use_by_index_or_uuid(gpus):
    gpus.set(100, 2000, 30000)
    assert gpu_memory_used_mib(None) == {"0": 100.0, "1": 2000.0, "2": 30000.0}
    assert gpu_memory_used_mib(frozenset({"2", "0"})) == {"0": 100.0, "2": 30000.0}
    assert gpu_memory_used_mib(frozenset({"GPU-1aaaa-bbbb"})) == {"1": 2000.0}


def test_a_box_without_nvidia_smi_reads_no_gpu_memory(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_memory_used_mib(None) is None
    assert GpuMemoryPeak(visible=None).read() is None


def test_a_failing_nvidia_smi_reads_no_gpu_memory_and_says_why(gpus, caplog):
    gpus.set(100)
    gpus.lose_the_driver()
    assert gpu_memory_used_mib(None) is None
    assert "couldn't communicate with the NVIDIA driver" in caplog.text


def test_a_reading_that_is_not_a_number_is_none_and_said_once(gpus, caplog):
    (gpus.folder / "readings.csv").write_text("0, GPU-0aaaa-bbbb, [N/A]\n")
    assert gpu_memory_used_mib(None) is None
    assert gpu_memory_used_mib(None) is None
    (said,) = [r.message for r in caplog.records if "GPU memory not read" in r.message]
    assert "[N/A]" in said


def test_the_gpu_peak_is_the_fullest_visible_gpus_highest_reading(gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    peak = GpuMemoryPeak()  # the GPUs CUDA_VISIBLE_DEVICES names, as a step's process sees
    gpus.set(0, 0, 90000)  # GPU 2 is not the step's; an idle GPU reads 0 MiB
    assert peak.read() == 0
    gpus.set(500, 700, 90000)
    assert peak.read() == 700
    gpus.set(1500, 100, 90000)
    assert peak.read() == 1500
    gpus.set(10, 10, 90000)
    assert peak.read() == 1500


def test_a_steps_manifest_records_the_peak_gpu_memory_read_while_it_ran(gpus, tmp_path):
    folder = tmp_path / "step"
    step = Step(folder, "asset", StatementAuditResult, StepInputs.hash({}), {})
    gpus.set(1000, 10)
    with step.journaled(every_s=0.01):
        gpus.set(1000, 64000)  # a spike the journal reads while the body runs
        deadline = time.monotonic() + 60  # a bound on a stuck journal, not a speed
        while journal_peak_gpu_mib(folder) != 64000:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        gpus.set(1000, 20)
    result = StatementAuditResult(problems=0, checks=0, statuses={}, found={}, simulated=True)
    step.finish(result, [])
    usage = json.loads((folder / "manifest.json").read_text())["usage"]
    assert usage["peak_gpu_mib"] == 64000


def journal_peak_gpu_mib(folder: Path) -> float | None:
    records = list((folder / "usage").glob("*.json"))
    if not records:
        return None
    return AttemptUsage.model_validate_json(records[0].read_text()).usage.peak_gpu_mib


def test_a_step_sampled_outside_a_journal_reads_while_its_body_runs(gpus):
    peak = GpuMemoryPeak(visible=None)
    gpus.set(10)
    with peak.sampled(every_s=0.01):
        gpus.set(5000)
        deadline = time.monotonic() + 60
        while peak.peak_mib != 5000:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        gpus.set(10)
    assert peak.peak_mib == 5000


def test_a_step_cuda_may_not_use_any_gpu_reads_none(gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # CUDA's way of saying: no GPU
    gpus.set(100, 200)
    assert GpuMemoryPeak().read() is None


def test_a_hung_nvidia_smi_is_given_up_on_and_said(gpus, caplog, monkeypatch):
    monkeypatch.setattr(usage, "NVIDIA_SMI_TIMEOUT_S", 0.5)
    gpus.hang()
    assert gpu_memory_used_mib(None) is None
    assert "timed out after 0.5 seconds" in caplog.text


def test_an_nvidia_smi_that_cannot_be_run_reads_none_and_says_why(gpus, caplog):
    tool = gpus.folder / "nvidia-smi"
    tool.write_text("#!/nonexistent/sh\n")  # on PATH, executable, its interpreter gone
    gpus.set(100)
    assert gpu_memory_used_mib(None) is None
    assert "No such file or directory" in caplog.text
