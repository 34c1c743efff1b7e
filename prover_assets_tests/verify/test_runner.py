"""Verifying a generations file: resume by key, stale verdicts, commit chunks."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prover_assets.records import Appender, Generation, Verification, publish_records, read_records
from prover_assets.verify.runner import (
    ATTEMPTS_FILE,
    ChunkInfrastructureError,
    PriorAttempt,
    StaleVerdictError,
    verify_generations,
)
from prover_assets.verify.validity import check_infrastructure_share
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.factories import make_generation, make_problem
from prover_assets_tests.lean_double import double_backend, repl_log

SIGNATURE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by"


def completion(tactic: str) -> str:
    return f"```lean4\n{SIGNATURE}\n  {tactic}\n```"


def write_generations(path: Path, tactics: list[str]) -> list[Generation]:
    generations = [
        make_generation(sample_idx=i, completion_text=completion(t)) for i, t in enumerate(tactics)
    ]
    publish_records(path, generations)
    return generations


def run(tmp_path, generations_path, verdicts_path, rules=None, cache=None, **kwargs):
    problems = {"p1": make_problem()}
    with double_backend(tmp_path / "repl", rules, workers=2) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=True), cache)
        return verify_generations(
            problems,
            generations_path,
            verdicts_path,
            verifier,
            commit_every=kwargs.pop("commit_every", 3),
            **kwargs,
        )


def test_every_generation_gets_exactly_one_verdict(tmp_path):
    write_generations(
        tmp_path / "gen.jsonl", [f"omega -- {i}" for i in range(7)] + ["native_decide"]
    )
    stats = run(tmp_path, tmp_path / "gen.jsonl", tmp_path / "ver.jsonl")
    verdicts = read_records(tmp_path / "ver.jsonl", Verification)
    assert sorted(v.sample_idx for v in verdicts) == list(range(8))
    assert stats.accepted_now == 7
    assert stats.stages == {"accepted": 7, "gate": 1}


def test_rerun_verifies_nothing_twice(tmp_path):
    write_generations(tmp_path / "gen.jsonl", [f"omega -- {i}" for i in range(5)])
    run(tmp_path, tmp_path / "gen.jsonl", tmp_path / "ver.jsonl")
    sent = len(repl_log(tmp_path / "repl"))
    stats = run(tmp_path, tmp_path / "gen.jsonl", tmp_path / "ver.jsonl")
    assert (stats.already_verified, stats.verified_now) == (5, 0)
    assert len(repl_log(tmp_path / "repl")) == sent


def test_copied_verdicts_are_counted_in_the_result_and_not_timed(tmp_path):
    from prover_assets.verify.cache import VerdictCache

    cache = VerdictCache(tmp_path / "cache")
    write_generations(tmp_path / "gen.jsonl", ["omega", "omega", "simp"])
    stats = run(tmp_path, tmp_path / "gen.jsonl", tmp_path / "one.jsonl", cache=cache)
    assert (stats.verified_now, stats.cached_now, len(stats.verify_seconds)) == (3, 1, 2)
    again = run(tmp_path, tmp_path / "gen.jsonl", tmp_path / "two.jsonl", cache=cache)
    assert (again.verified_now, again.cached_now, again.verify_seconds) == (3, 3, [])
    assert again.to_result().cached_now == 3
    first = {v.key: v for v in read_records(tmp_path / "one.jsonl", Verification)}
    for verdict in read_records(tmp_path / "two.jsonl", Verification):
        assert (verdict.stage, verdict.reasons) == (
            first[verdict.key].stage,
            first[verdict.key].reasons,
        )


KILL_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from prover_assets.verify.runner import verify_generations
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.factories import make_problem
from prover_assets_tests.lean_double import double_backend
rules = [{{"match": {{"substring": "omega"}}, "action": "delay", "argument": "0.15"}}]
with double_backend(Path({repl!r}), rules, workers=2) as backend:
    verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=True))
    verify_generations({{"p1": make_problem()}}, Path({gen!r}), Path({ver!r}), verifier, commit_every=2)
"""


def sent_indices(tmp_path) -> set[int]:
    """Sample indices of the proofs the REPL received (each proof states `have h<i>`)."""
    return {
        int(m.group(1))
        for e in repl_log(tmp_path / "repl")
        if (m := re.search(r"have h(\d+) :", e["request"].get("cmd", "")))
    }


@pytest.mark.slow
def test_kill_9_mid_run_then_resume_loses_nothing_and_repeats_no_committed_verdict(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, [f"have h{i} : {i} = {i} := rfl\n  omega" for i in range(16)])
    script = KILL_SCRIPT.format(
        root=str(Path(__file__).parents[2]), repl=str(tmp_path / "repl"), gen=str(gen), ver=str(ver)
    )
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not ver.exists() or len(ver.read_bytes().splitlines()) < 4
    ):
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    with Appender(ver, Verification) as appender:
        committed = {key[1] for key in appender.keys}
    assert 4 <= len(committed) < 16
    assert committed <= sent_indices(tmp_path)
    (tmp_path / "repl" / "repl_log.jsonl").unlink()
    run(tmp_path, gen, ver)
    assert not sent_indices(tmp_path) & committed
    verdicts = read_records(ver, Verification)
    assert sorted(v.sample_idx for v in verdicts) == list(range(16))


def test_stale_verdict_raises(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["omega", "simp"])
    run(tmp_path, gen, ver)
    write_generations(gen, ["omega", "positivity"])
    with pytest.raises(StaleVerdictError, match="judged other code"):
        run(tmp_path, gen, ver)


def test_reverify_stale_moves_stale_verdicts_aside_and_verifies_again(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["omega", "simp"])
    run(tmp_path, gen, ver)
    write_generations(gen, ["omega", "positivity"])
    stats = run(tmp_path, gen, ver, reverify_stale=True)
    assert (stats.stale_reverified, stats.verified_now) == (1, 1)
    assert len(read_records(tmp_path / "stale_verdicts.jsonl", Verification)) == 1
    assert len(read_records(ver, Verification)) == 2


def test_verdict_without_generation_raises(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["omega", "simp"])
    run(tmp_path, gen, ver)
    write_generations(gen, ["omega"])
    with pytest.raises(StaleVerdictError, match="have no generation"):
        run(tmp_path, gen, ver)


def test_chunk_with_more_than_half_dead_is_not_written(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["decide -- 0", "decide -- 1", "omega"])
    rules = [{"match": {"substring": "decide"}, "action": "crash", "argument": "9"}]
    with pytest.raises(ChunkInfrastructureError, match="2 of 3"):
        run(tmp_path, gen, ver, rules, commit_every=3)
    assert not ver.exists() or read_records(ver, Verification) == []


def test_chunk_with_a_minority_dead_is_written_with_infrastructure_rows(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["decide", "omega -- 1", "omega -- 2"])
    rules = [{"match": {"substring": "decide"}, "action": "crash", "argument": "9"}]
    stats = run(tmp_path, gen, ver, rules, commit_every=3)
    assert stats.stages == {"infrastructure": 1, "accepted": 2}


def test_torn_verdict_line_is_dropped_counted_and_reverified(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["omega -- 0", "omega -- 1"])
    run(tmp_path, gen, ver)
    data = ver.read_bytes().splitlines(keepends=True)
    ver.write_bytes(data[0] + data[1][:40])
    stats = run(tmp_path, gen, ver)
    assert (stats.torn_dropped, stats.already_verified, stats.verified_now) == (1, 1, 1)


def test_resume_verifies_infrastructure_verdicts_again_as_new_attempts(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["decide", "omega -- 1", "omega -- 2"])
    crash = [{"match": {"substring": "decide"}, "action": "crash", "argument": "9"}]
    run(tmp_path, gen, ver, crash)
    run(tmp_path, gen, ver, crash)
    healed = run(tmp_path, gen, ver)
    assert (healed.already_verified, healed.infrastructure_reverified) == (2, 1)
    verdicts = {v.sample_idx: v for v in read_records(ver, Verification)}
    assert [verdicts[i].accepted for i in range(3)] == [True, True, True]
    assert verdicts[0].diagnostics.prior_attempts == 2
    attempts = read_records(tmp_path / ATTEMPTS_FILE, PriorAttempt)
    assert [(a.verdict.sample_idx, a.attempt, a.verdict.reasons) for a in attempts] == [
        (0, 1, ["infrastructure:proof:crash"]),
        (0, 2, ["infrastructure:proof:crash"]),
    ]


def test_each_resume_that_still_fails_records_one_more_attempt(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["decide", *[f"omega -- {i}" for i in range(1, 6)]])
    crash = [{"match": {"substring": "decide"}, "action": "crash", "argument": "9"}]
    for _ in range(3):
        stats = run(tmp_path, gen, ver, crash, commit_every=6)
    # The infrastructure verdict is the only one verified again each time; nothing else is.
    assert (stats.infrastructure_reverified, stats.verified_now) == (1, 1)
    attempts = read_records(tmp_path / ATTEMPTS_FILE, PriorAttempt)
    assert [a.attempt for a in attempts] == [1, 2]
    (last,) = [v for v in read_records(ver, Verification) if v.sample_idx == 0]
    assert last.stage.value == "infrastructure" and last.diagnostics.prior_attempts == 2


def test_a_crash_between_recording_an_attempt_and_rewriting_the_stream_doubles_nothing(
    tmp_path, monkeypatch
):
    from prover_assets.verify import runner

    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["decide", "omega"])
    run(tmp_path, gen, ver, [{"match": {"substring": "decide"}, "action": "crash"}])

    def crash(*args):
        raise KeyboardInterrupt("killed after the attempts were appended")

    monkeypatch.setattr(runner, "_remove_verdicts", crash)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, gen, ver)
    monkeypatch.undo()
    run(tmp_path, gen, ver)
    attempts = read_records(tmp_path / ATTEMPTS_FILE, PriorAttempt)
    assert [a.attempt for a in attempts] == [1]
    assert all(v.accepted for v in read_records(ver, Verification))


def test_infrastructure_share_above_the_bound_fails_and_no_rows_never_pass(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["decide", "omega -- 1", "omega -- 2", "omega -- 3"])
    run(tmp_path, gen, ver, [{"match": {"substring": "decide"}, "action": "crash"}], commit_every=4)
    assert not check_infrastructure_share(ver, 0.2).passed  # 1 of 4
    assert check_infrastructure_share(ver, 0.25).passed
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert not check_infrastructure_share(tmp_path / "empty.jsonl", 1.0).passed
    assert check_infrastructure_share(tmp_path / "empty.jsonl", 0.0, nothing_generated=True).passed


def test_an_empty_batch_passes_the_infrastructure_check_and_a_filled_one_still_counts(tmp_path):
    gen, ver = tmp_path / "gen.jsonl", tmp_path / "ver.jsonl"
    write_generations(gen, ["decide", "omega -- 1"])
    run(tmp_path, gen, ver, [{"match": {"substring": "decide"}, "action": "crash"}], commit_every=4)
    assert not check_infrastructure_share(ver, 0.2, nothing_generated=True).passed  # 1 of 2


def test_a_run_holds_a_few_generations_at_a_time_never_the_whole_file(tmp_path, monkeypatch):
    import weakref

    from prover_assets.verify import runner

    write_generations(tmp_path / "gen.jsonl", [f"omega -- {i}" for i in range(40)])
    refs: list[weakref.ref] = []
    most = [0]
    read = runner.iter_records

    def counted(path, model, **kwargs):
        for record in read(path, model, **kwargs):
            if isinstance(record, Generation):
                refs.append(weakref.ref(record))
                most[0] = max(most[0], sum(ref() is not None for ref in refs))
            yield record

    monkeypatch.setattr(runner, "iter_records", counted)
    stats = run(tmp_path, tmp_path / "gen.jsonl", tmp_path / "ver.jsonl")
    assert stats.accepted_now == 40
    # the one being read, the one being admitted, one a worker's thread still refers to
    assert most[0] <= 4
