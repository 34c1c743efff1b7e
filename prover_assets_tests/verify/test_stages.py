"""The verification steps: the Lean workers' lease, verdicts judged while their generation's own
step writes it (the overlapped schedule's pair), a kill -9 of that shape, the header imports
of a batch, and the statement audit."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
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
from prover_assets.records.outputs import ChecksumError, StageResult, Step, StepInputs
from prover_assets.records.owned import HOST
from prover_assets.verify.elaboration import Elaboration
from prover_assets.verify.runner import verify_generations
from prover_assets.verify.self_test import self_test
from prover_assets.verify.stages import (
    REFERENCE_FILE,
    GenerationFailed,
    GenerationOutcome,
    SiblingGeneration,
    lean_workers_lease,
    materialize_reference_elaboration,
    materialize_statement_audit,
    materialize_verdicts,
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
def open_verifier(repl: Path, data_root: Path) -> Iterator[StrictVerifier]:
    """What the `lean` resource opens: the lease on the workers, then the REPL double."""
    with (
        lean_workers_lease(data_root, poll_s=0.05),
        double_backend(repl, SLOW_OMEGA, workers=2) as backend,
    ):
        yield StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))


class GenerationsCounted(StageResult):
    """The result a generation step's manifest records here (its own is the engine's)."""

    rows: int


def generate(folder: Path, delay_s: float, fail_after: int | None = None) -> None:
    """The generation step: commit one sample at a time, as the engine finishes each, then
    write the manifest (its output is whole); with `fail_after`, die after that many."""
    path = folder / "generations.jsonl"
    with Appender(path, Generation) as appender:
        for n, generation in enumerate(generations()):
            if n == fail_after:
                raise RuntimeError("the engine died")
            if generation.key not in appender:
                appender.append(generation)
                time.sleep(delay_s)
    step = Step(folder, str(folder), GenerationsCounted, StepInputs({}, {}), {})
    step.finish(GenerationsCounted(rows=SAMPLES), [path])


def problems_of(root: Path) -> Path:
    problems = root / "problems.jsonl"
    if not problems.exists():
        publish_records(problems, [make_problem()])
    return problems


def generate_beside_verification(root: Path, delay_s: float, fail_after: int | None = None):
    """The overlapped schedule's pair: the generation step writes its folder in one thread
    while the verdict step judges each sample as it lands, told how the generation stands."""
    outcome = [GenerationOutcome.RUNNING]

    def generation_step() -> None:
        try:
            generate(root / "generations", delay_s, fail_after)
            outcome[0] = GenerationOutcome.COMPLETE
        except RuntimeError:
            outcome[0] = GenerationOutcome.FAILED

    writer = threading.Thread(target=generation_step)
    writer.start()
    try:
        return verdicts_beside(root, lambda: outcome[0])
    finally:
        writer.join()


def verdicts_beside(root: Path, outcome: Callable[[], GenerationOutcome]):
    """The pair's verdict step on `root`'s generations, told how their step stands by
    `outcome`."""
    return materialize_verdicts(
        root / "verdicts",
        generations_file=root / "generations" / "generations.jsonl",
        problems_file=problems_of(root),
        open_verifier=lambda: open_verifier(root / "repl", root),
        self_test=lambda verifier, header: None,
        commit_every=2,
        sibling=SiblingGeneration(outcome, poll_s=0.05),
    )


def judgement(verdict: Verification) -> tuple:
    return verdict.key, verdict.accepted, verdict.stage, tuple(verdict.reasons), verdict.code_sha256


def sequential_reference(root: Path) -> set[tuple]:
    """The exclusive schedule's shape: every sample generated, then every verdict."""
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


def test_a_second_holder_of_the_lean_workers_waits_for_the_first(tmp_path):
    got: list[float] = []

    def second() -> None:
        with lean_workers_lease(tmp_path, poll_s=0.01):
            got.append(time.monotonic())

    with lean_workers_lease(tmp_path):
        waiting = threading.Thread(target=second)
        waiting.start()
        time.sleep(0.2)
        assert got == []
        released = time.monotonic()
    waiting.join(timeout=5)
    assert got and got[0] >= released


@pytest.mark.slow
def test_verdicts_are_judged_as_the_samples_land_and_completed_once_the_generation_ends(tmp_path):
    step = generate_beside_verification(tmp_path / "overlapped", delay_s=0.05)
    beside = step.manifest["verified_beside_generation"]
    assert 0 < beside <= SAMPLES
    assert step.result.already_verified + step.result.verified_now == SAMPLES
    assert step.manifest["inputs"]  # the whole generation's sha256, taken once it was complete
    overlapped = read_records(tmp_path / "overlapped" / "verdicts" / "verdicts.jsonl", Verification)
    assert {judgement(v) for v in overlapped} == sequential_reference(tmp_path / "sequential")


def test_a_failed_generation_keeps_the_verdicts_made_beside_it_and_writes_no_manifest(tmp_path):
    root = tmp_path / "failed"
    with pytest.raises(GenerationFailed, match=r"kept in .*for the resume"):
        generate_beside_verification(root, delay_s=0.05, fail_after=6)
    assert not (root / "verdicts" / MANIFEST_NAME).exists()
    judged = read_records(root / "verdicts" / "verdicts.jsonl", Verification)
    landed = read_records(root / "generations" / "generations.jsonl", Generation)
    assert len(landed) == 6
    assert {v.key for v in judged} <= {g.key for g in landed}


def test_a_generation_whose_file_changed_after_its_manifest_is_refused(tmp_path):
    root = tmp_path / "changed"
    generate(root / "generations", delay_s=0.0)
    publish_records(root / "generations" / "generations.jsonl", generations()[:8])
    with pytest.raises(ChecksumError, match=r"generations\.jsonl"):
        verdicts_beside(root, lambda: GenerationOutcome.COMPLETE)


def test_a_watch_that_raises_stops_the_verdict_step_with_its_error(tmp_path):
    root = tmp_path / "watch"

    def outcome() -> GenerationOutcome:
        raise ConnectionError("the event log is unreachable")

    with pytest.raises(ConnectionError, match="event log"):
        verdicts_beside(root, outcome)


KILL_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from prover_assets_tests.verify.test_stages import generate_beside_verification
print(generate_beside_verification(Path({run!r}), delay_s=0.1).manifest["verified_beside_generation"])
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
    landed = (run / "generations" / "generations.jsonl").read_bytes().count(b"\n")
    assert verdicts.read_bytes().count(b"\n") >= 3
    assert landed < SAMPLES, "the kill came after the generation: not the overlapped shape"
    deadline = time.monotonic() + 5
    while children_alive(str(run / "repl")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children_alive(str(run / "repl")) == []
    resumed = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    )
    assert int(resumed.stdout.splitlines()[-1]) > 0
    assert not any(folder.exists() for folder in left)  # ...until the next verifier sweeps them
    assert (run / "verdicts" / MANIFEST_NAME).exists()
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


def test_the_reference_elaboration_records_each_problem_and_is_reused_when_current(tmp_path):
    problems = tmp_path / "problems.jsonl"
    publish_records(problems, [make_problem("p1"), make_problem("p2", PREAMBLE_STATEMENT)])
    # Lean refuses the preamble problem's reference (its `solution` is the marker), not p1's.
    rules = [
        {"match": {"regex": "solution[\\s\\S]*theorem _ref"}, "reply": error_reply("unknown")},
        *working_instrument(),
    ]

    def elaborate():
        @contextlib.contextmanager
        def verifier() -> Iterator[StrictVerifier]:
            with double_backend(tmp_path / "repl", rules, workers=2) as backend:
                yield StrictVerifier(backend, VerifierPolicy(budget_s=30.0, feedback=False))

        return materialize_reference_elaboration(
            tmp_path / "reference",
            problems_file=problems,
            open_verifier=verifier,
            self_test=lambda verifier, header: None,
        )

    first = elaborate()
    assert first.result.problems == 2
    assert first.result.statuses == {
        "elaborated": 1,
        "error": 1,
        "timeout": 0,
        "infrastructure": 0,
    }
    assert not first.result.simulated
    written = read_records(tmp_path / "reference" / REFERENCE_FILE, Elaboration)
    assert {r.problem_id: r.status.value for r in written} == {"p1": "elaborated", "p2": "error"}
    again = elaborate()
    assert again.reused and again.result == first.result
