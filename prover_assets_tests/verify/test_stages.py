"""Verification beside generation: the Lean workers' lease, the verdicts streamed while the
samples land, and a kill -9 of the overlapped shape."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from prover_assets.records import (
    MANIFEST_NAME,
    Appender,
    Generation,
    Verification,
    publish_records,
    read_records,
)
from prover_assets.records.owned import HOST
from prover_assets.verify.runner import verify_generations
from prover_assets.verify.self_test import self_test
from prover_assets.verify.stages import (
    LeanWorkersBusy,
    lean_workers_lease,
    lean_workers_wanted,
    materialize_statement_audit,
    materialize_verdicts,
    stream_verdicts,
    verdicts_alongside,
)
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.factories import PREAMBLE_STATEMENT, make_generation, make_problem
from prover_assets_tests.lean_double import (
    double_backend,
    error_reply,
    repl_log,
    working_instrument,
)

SIGNATURE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by"
SLOW_OMEGA = [{"match": {"substring": "omega"}, "action": "delay", "argument": "0.15"}]
SAMPLES = 16


def generations() -> list[Generation]:
    """Sixteen samples; every fourth is `sorry` (rejected), the others accepted after a delay."""
    tactics = [
        "sorry" if i % 4 == 3 else f"have h{i} : {i} = {i} := rfl\n  omega" for i in range(SAMPLES)
    ]
    return [
        make_generation(sample_idx=i, completion_text=f"```lean4\n{SIGNATURE}\n  {t}\n```")
        for i, t in enumerate(tactics)
    ]


@contextlib.contextmanager
def open_verifier(
    repl: Path, data_root: Path, give_up: threading.Event | None = None
) -> Iterator[StrictVerifier]:
    """What the `lean` resource opens: the lease on the workers, then the REPL double."""
    with (
        lean_workers_lease(data_root, give_up=give_up, poll_s=0.05),
        double_backend(repl, SLOW_OMEGA, workers=2) as backend,
    ):
        yield StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))


def generate(path: Path, delay_s: float) -> None:
    """The generation side: commit one sample at a time, as the engine finishes each."""
    with Appender(path, Generation) as appender:
        for generation in generations():
            if generation.key not in appender:
                appender.append(generation)
                time.sleep(delay_s)


def generate_beside_verification(root: Path, delay_s: float):
    """One generation step of the overlapped shape: samples land while their verdicts stream."""
    problems = root / "problems.jsonl"
    if not problems.exists():
        publish_records(problems, [make_problem()])

    def stream(until: threading.Event):
        return stream_verdicts(
            root / "verdicts",
            generations_file=root / "generations.jsonl",
            problems_file=problems,
            open_verifier=lambda: open_verifier(root / "repl", root, give_up=until),
            self_test=lambda verifier, header: None,
            commit_every=2,
            until=until,
            wanted=lambda: lean_workers_wanted(root),
            poll_s=0.05,
        )

    with verdicts_alongside(stream) as streamed:
        generate(root / "generations.jsonl", delay_s)
    return streamed


def finish_verdicts(root: Path):
    """The verdict step after the generation step: verifies what the stream did not."""
    return materialize_verdicts(
        root / "verdicts",
        generations_file=root / "generations.jsonl",
        problems_file=root / "problems.jsonl",
        open_verifier=lambda: open_verifier(root / "repl", root),
        self_test=lambda verifier, header: None,
        commit_every=2,
    )


def judgement(verdict: Verification) -> tuple:
    return verdict.key, verdict.accepted, verdict.stage, tuple(verdict.reasons), verdict.code_sha256


def sequential_reference(root: Path) -> set[tuple]:
    """Today's shape: every sample generated, then every verdict."""
    publish_records(root / "generations.jsonl", generations())
    with double_backend(root / "repl", SLOW_OMEGA, workers=2) as backend:
        verify_generations(
            {"p1": make_problem()},
            root / "generations.jsonl",
            root / "verdicts.jsonl",
            StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)),
            commit_every=2,
        )
    return {judgement(v) for v in read_records(root / "verdicts.jsonl", Verification)}


def test_a_second_holder_of_the_lean_workers_waits_or_gives_up(tmp_path):
    give_up = threading.Event()
    with lean_workers_lease(tmp_path):
        give_up.set()
        with (
            pytest.raises(LeanWorkersBusy, match=f"pid {os.getpid()}"),
            lean_workers_lease(tmp_path, give_up=give_up, poll_s=0.01),
        ):
            pass
    with lean_workers_lease(tmp_path, give_up=give_up):  # free again once released
        pass


@pytest.mark.slow
def test_verdicts_stream_while_samples_land_and_the_verdict_step_finishes_the_rest(tmp_path):
    streamed = generate_beside_verification(tmp_path / "overlapped", delay_s=0.05)
    assert streamed.error is None and streamed.skipped is None
    assert 0 < streamed.verified <= SAMPLES
    result = finish_verdicts(tmp_path / "overlapped")
    assert result.result.already_verified == streamed.verified
    assert result.result.already_verified + result.result.verified_now == SAMPLES
    overlapped = read_records(tmp_path / "overlapped" / "verdicts" / "verdicts.jsonl", Verification)
    assert {judgement(v) for v in overlapped} == sequential_reference(tmp_path / "sequential")


def test_busy_lean_workers_leave_the_verdicts_to_their_step_and_say_why(tmp_path):
    root = tmp_path / "busy"
    root.mkdir()
    with lean_workers_lease(root):  # another step verifies meanwhile
        streamed = generate_beside_verification(root, delay_s=0.0)
    assert streamed.verified == 0
    assert "Lean workers were busy" in (streamed.skipped or "")
    assert not (root / "verdicts" / "verdicts.jsonl").exists()


@pytest.mark.slow
def test_a_waiting_verdict_step_gets_the_lean_workers_before_the_generation_ends(tmp_path):
    root = tmp_path / "handover"
    root.mkdir()
    got: list[float] = []

    def verdict_step_of_another_stage() -> None:
        time.sleep(0.6)  # the stream holds the workers by now
        with lean_workers_lease(root, poll_s=0.05):
            got.append(time.monotonic())
            time.sleep(0.3)

    other = threading.Thread(target=verdict_step_of_another_stage)
    other.start()
    streamed = generate_beside_verification(root, delay_s=0.2)  # about 3 s of generation
    ended = time.monotonic()
    other.join()
    assert got and got[0] < ended - 1.0
    assert streamed.handovers == 1 and streamed.error is None
    finish_verdicts(root)
    rows = read_records(root / "verdicts" / "verdicts.jsonl", Verification)
    assert {judgement(v) for v in rows} == sequential_reference(tmp_path / "sequential")


def test_complete_verdicts_are_not_streamed_into(tmp_path):
    root = tmp_path / "done"
    (root / "verdicts").mkdir(parents=True)
    (root / "verdicts" / MANIFEST_NAME).write_text("{}")
    streamed = generate_beside_verification(root, delay_s=0.0)
    assert streamed.skipped == "the verdicts are complete already"


KILL_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from prover_assets_tests.verify.test_stages import generate_beside_verification
print(generate_beside_verification(Path({run!r}), delay_s=0.1).model_dump_json())
"""


def children_alive(marker: str) -> list[int]:
    """Processes whose command line names `marker` (the double's log folder of this test)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    alive.append(int(entry.name))
    return alive


@pytest.mark.slow
def test_kill_9_mid_generation_with_verification_running_resumes_to_identical_verdicts(tmp_path):
    run = tmp_path / "overlapped"
    run.mkdir()
    verdicts = run / "verdicts" / "verdicts.jsonl"
    script = KILL_SCRIPT.format(root=str(Path(__file__).parents[2]), run=str(run))
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not verdicts.exists() or verdicts.read_bytes().count(b"\n") < 3
    ):
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    # Each REPL's TMPDIR is named for the verifier that started it: the killed one's stay...
    left = list(Path(tempfile.gettempdir()).glob(f"lean-repl-h{HOST}-p{process.pid}-*"))
    assert left, "the kill left no REPL folder to sweep: not the fault under test"
    landed = (run / "generations.jsonl").read_bytes().count(b"\n")
    assert verdicts.read_bytes().count(b"\n") >= 3
    assert landed < SAMPLES, "the kill came after the generation: not the overlapped shape"
    deadline = time.monotonic() + 5
    while children_alive(str(run / "repl")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children_alive(str(run / "repl")) == []
    resumed = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    )
    assert json.loads(resumed.stdout.splitlines()[-1])["error"] is None
    assert not any(folder.exists() for folder in left)  # ...until the next verifier sweeps them
    finish_verdicts(run)
    rows = read_records(verdicts, Verification)
    assert len(rows) == len({v.key for v in rows}) == SAMPLES
    assert {judgement(v) for v in rows} == sequential_reference(tmp_path / "sequential")


POOL_HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\n"
    "open BigOperators Real Nat Topology Rat"
)


def test_a_batch_of_one_header_is_imported_once_by_each_repl_process(tmp_path):
    # Pool statements carry a header of their own (not the protocol's), as the demo's do.
    statement = POOL_HEADER + "\n\ntheorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by sorry"
    problems = [make_problem(f"p{i}", statement, header=POOL_HEADER) for i in range(3)]
    publish_records(tmp_path / "problems.jsonl", problems)
    samples = [make_generation(f"p{i}", j) for i in range(3) for j in range(3)]
    publish_records(tmp_path / "generations.jsonl", samples)
    rules = working_instrument()

    def require_self_test(verifier: StrictVerifier, header: str) -> None:
        assert self_test(verifier.backend, 5.0, header).passed

    with double_backend(tmp_path / "repl", rules, workers=2) as backend:
        step = materialize_verdicts(
            tmp_path / "verdicts",
            generations_file=tmp_path / "generations.jsonl",
            problems_file=tmp_path / "problems.jsonl",
            open_verifier=lambda: contextlib.nullcontext(
                StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))
            ),
            self_test=require_self_test,
            commit_every=4,
        )
    log = repl_log(tmp_path / "repl")
    headers = [entry for entry in log if "env" not in entry["request"]]
    imports_by_process = Counter(entry["pid"] for entry in headers)
    assert all(count == 1 for count in imports_by_process.values())
    assert {entry["request"]["cmd"] for entry in headers} == {POOL_HEADER}
    assert step.result.accepted_now == len(samples)
    assert step.result.header_imports["worker-0"] == step.result.header_imports["worker-1"] == 1
    # The warm spare is counted on its own; its import may still be in flight when counted.
    assert 0 <= step.result.header_imports["spare"] <= len(headers) - 2


@contextlib.contextmanager
def audit_verifier(repl: Path) -> Iterator[StrictVerifier]:
    """A working instrument whose REPL proves every `_audit` theorem by norm_num, nothing else."""
    rules = [
        {"match": {"regex": "_audit[^\n]*:= by\n  norm_num$"}, "reply": {}},
        {"match": {"regex": "_audit[^\n]*:= by\n  [a-z]"}, "reply": error_reply("failed")},
        *working_instrument(),
    ]
    # Timeouts a loaded machine meets (two test processes beside torch): under the 5 s check
    # timeout one audit check came back as infrastructure in 1 of about 10 runs; the audit's
    # counts, not the worker's timeouts, are what the tests here judge.
    with double_backend(repl, rules, workers=2, check_timeout_s=30.0) as backend:
        yield StrictVerifier(backend, VerifierPolicy(budget_s=120.0, feedback=False))


def test_the_statement_audit_step_counts_by_status_and_kind_and_is_reused_when_current(
    tmp_path,
):
    problems = tmp_path / "problems.jsonl"
    publish_records(problems, [make_problem("p1"), make_problem("p2", PREAMBLE_STATEMENT)])
    folder = tmp_path / "audit"

    def audit():
        return materialize_statement_audit(
            folder,
            problems_file=problems,
            open_verifier=lambda: audit_verifier(tmp_path / "repl"),
            # a budget a loaded CI machine meets: the self-test is not what this test judges
            self_test=lambda verifier, header: self_test(verifier.backend, 30.0, header),
        )

    first = audit()
    # 2 problems x (2 elaborations + 6 tactics + 4 vacuity checks); norm_num proves each
    assert first.result.checks == 24 and first.result.problems == 2
    assert first.result.statuses == {"holds": 6, "fails": 18, "timeout": 0, "infrastructure": 0}
    assert first.result.found == {"trivial": 2}
    assert not first.result.simulated
    assert first.manifest["config"]["budget_s"] == 30.0  # the audit's own budget, not 120 s
    again = audit()
    assert again.reused and again.result == first.result
