"""The expert-iteration demo (configs/demo-iterations.yaml: 2 iterations x 2 training seeds) end
to end as `make demo-iterations` runs it, at the size of the tests of its mechanics (the demo's
positive control is test_demo.py's, at the full size), killed with kill -9 (its whole process group)
mid-generation in the second iteration and run again: nothing lost or doubled, iteration 2
sampling only what iteration 1 left unsolved with iteration 1's export, each iteration and seed
materialized as its own partition and key, and a report whose only PRIMARY-eligible comparison is
the registered one, with the seed spread and the expert-iteration curve beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest
import yaml

from prover_assets.generation.stages import round0_problems
from prover_assets.records import Generation, Problem, iter_records, read_records
from prover_assets_tests.support import ROOT, dagster_home, mechanics_size, shipped_config

# Two whole iterations, a kill -9 and the rerun, within a bound of its own on a hung loop rather
# than the suite's 10 minutes a test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

SEEDS = (20261012, 7)
# Generations commit every COMMIT samples here, so that the kill, after the first commit of
# iteration 2, lands mid-generation. The demo's planted rule (one tactic in six accepted) leaves
# some of the 12 pool problems unsolved after iteration 1, some of which iteration 2 then solves.
COMMIT = 4


def demo(env: dict, log: Path) -> subprocess.Popen:
    """`python -m prover_assets.demo` in its own session (its group holds every child)."""
    return subprocess.Popen(
        [sys.executable, "-m", "prover_assets.demo"],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def sample_keys(path: Path) -> list[tuple]:
    return [g.key for g in iter_records(path, Generation)] if path.exists() else []


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("iterations")
    data = tmp / "data"
    raw = mechanics_size(shipped_config(data, "demo-iterations.yaml"), planted_rule=True)
    raw["resources"]["experiment"]["config"]["spec"]["generation"]["commit_every"] = COMMIT
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    home = dagster_home(tmp / "home")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PROVER_ASSETS_CONFIG": str(config)}
    log = tmp / "demo.log"
    second = data / "generations" / "pool" / "r0" / "iteration-2" / "generations.jsonl"
    first = demo(env, log)
    # A bound on a hung loop, not an expectation of speed.
    deadline = time.monotonic() + 2700
    while len(sample_keys(second)) < COMMIT:  # mid-generation, in the second iteration
        assert first.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "iteration 2 never started generating"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before_kill = sample_keys(second)
    again = demo(env, log)
    assert again.wait(timeout=1800) == 0, log.read_text()[-5000:]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        report = instance.get_latest_materialization_event(dg.AssetKey(["eval_report"]))
        partitions = {
            key: instance.get_materialized_partitions(dg.AssetKey(list(key)))
            for key in (
                ("generations", "pool", "generations_pool_r0"),
                ("exported_model_seed7",),
                ("sft_shards",),
            )
        }
    folder = Path(report.asset_materialization.metadata["output_dir"].value)
    return {
        "data": data,
        "tmp": tmp,
        "home": home,
        "raw": raw,
        "before_kill": before_kill,
        "summary": json.loads((folder / "summary.json").read_text()),
        "report": (folder / "report.md").read_text(),
        "partitions": partitions,
    }


def test_the_kill_9_lost_and_doubled_no_sample_of_the_second_iteration(finished):
    keys = sample_keys(
        finished["data"] / "generations" / "pool" / "r0" / "iteration-2" / "generations.jsonl"
    )
    assert not [key for key, n in Counter(keys).items() if n > 1]
    assert set(finished["before_kill"]) <= set(keys)
    manifest = json.loads(
        (finished["data"] / "generations/pool/r0/iteration-2/manifest.json").read_text()
    )
    # the rerun resumed the killed stream: what was committed stayed, the rest was generated
    assert manifest["counts"]["already_present"] >= len(finished["before_kill"]) > 0
    assert manifest["counts"]["already_present"] + manifest["counts"]["generated_now"] == len(keys)
    assert manifest["counts"]["generated_now"] > 0  # the kill came before the last sample


def test_each_iteration_is_a_partition_and_each_seed_its_own_assets(finished):
    assert finished["partitions"] == {
        ("generations", "pool", "generations_pool_r0"): {"1", "2"},
        ("exported_model_seed7",): {"1", "2"},
        ("sft_shards",): {"1", "2"},
    }


def test_iteration_2_samples_only_what_iteration_1_left_unsolved(finished):
    data = finished["data"]
    first = [
        (
            data / f"generations/pool/r{r}/iteration-1/generations.jsonl",
            data / f"verdicts/pool/r{r}/iteration-1/verdicts.jsonl",
        )
        for r in (0, 1)
    ]
    unsolved = {
        p.problem_id for p in round0_problems(data / "train_pool" / "train_pool.jsonl", first)
    }
    second = {
        g.problem_id
        for g in iter_records(
            data / "generations/pool/r0/iteration-2/generations.jsonl", Generation
        )
    }
    pool = read_records(data / "train_pool" / "train_pool.jsonl", Problem)
    assert second == unsolved and 0 < len(unsolved) < len(pool)  # some, not all, left unsolved


def test_iteration_2_sampled_with_iteration_1s_export_of_the_registered_seed(finished):
    data = finished["data"]
    export = json.loads((data / "exported_model" / "iteration-1" / "manifest.json").read_text())
    revision = export["counts"]["revision"]
    revisions = {
        g.model_rev
        for g in iter_records(
            data / "generations/pool/r0/iteration-2/generations.jsonl", Generation
        )
    }
    assert revisions == {revision} and revision.startswith("sft-")


def test_only_the_registered_comparison_may_be_primary_and_every_other_is_exploratory(finished):
    summary = finished["summary"]
    [registered] = summary["comparisons"]
    assert registered["candidate"]["system"] == "candidate (iteration 1)"
    assert not registered["exploratory"]
    assert "SIMULATED verifier: not evidence" in registered["secondary_reasons"]
    assert not any(r.startswith("exploratory") for r in registered["secondary_reasons"])
    explored = summary["exploratory"]
    assert sorted((c["iteration"], c["seed"], c["against"]) for c in explored) == [
        (1, 7, "baseline"),
        (2, 7, "baseline"),
        (2, SEEDS[0], "baseline"),
        (2, SEEDS[0], "iteration 1"),
    ]
    assert not any(c["primary"] for c in explored)
    assert finished["report"].count("**exploratory**") == 4


def test_the_report_shows_the_seed_spread_and_the_expert_iteration_curve(finished):
    summary = finished["summary"]
    spread = summary["seed_spread"]
    assert [row["iteration"] for row in spread] == [1, 2]
    for row in spread:
        assert [s["seed"] for s in row["seeds"]] == list(SEEDS)
        solved = [s["solved_at_k"] for s in row["seeds"]]
        assert (row["min"], row["max"]) == (min(solved), max(solved))
        assert row["sentence"] in finished["report"]
    curve = summary["iteration_curve"]
    assert [r["iteration"] for r in curve] == [0, 1, 2]
    solved = [r["pool_solved_cumulative"] for r in curve]
    assert solved == sorted(solved) and solved[1] > 0
    assert 0 < curve[2]["pool_samples"] < curve[1]["pool_samples"]  # only the unsolved
    assert "## Expert iterations and training seeds" in finished["report"]
    assert "SIMULATED" in finished["report"]


def test_a_round_0_is_judged_by_what_it_was_made_from_not_by_the_config_now(finished):
    """Iteration 2's round 0 sampled the problems iteration 1 left unsolved; its check, run
    after the config turned to `problems: all`, judges it by the rounds its manifest says it
    left out (before: by the config now, which would want every problem)."""
    from prover_assets.definitions import build_definitions

    raw = json.loads(json.dumps(finished["raw"]))
    raw["resources"]["experiment"]["config"]["spec"]["iteration"]["problems"] = "all"
    changed = finished["tmp"] / "changed.yaml"
    changed.write_text(yaml.safe_dump(raw))
    definitions = build_definitions(changed)
    check = dg.AssetCheckKey(
        dg.AssetKey(["generations", "pool", "generations_pool_r0"]), "samples_per_problem"
    )
    # the check alone, of the job that makes its asset, as the asset page's "Execute" runs it
    raw["resources"]["experiment"]["config"]["preflight_override"] = "a check alone, no GPU"
    job = definitions.resolve_job_def("pool_round").get_subset(
        asset_selection=set(), asset_check_selection={check}
    )
    with dg.DagsterInstance.from_config(str(finished["home"])) as instance:
        judged = job.execute_in_process(
            run_config=raw, instance=instance, partition_key="2", raise_on_error=False
        )
    (evaluation,) = judged.get_asset_check_evaluations()
    assert evaluation.passed, evaluation.description
    manifest = json.loads(
        (finished["data"] / "generations/pool/r0/iteration-2/manifest.json").read_text()
    )
    # fewer problems than the pool's: with `problems: all` the check would have wanted them all
    pool = (finished["data"] / "train_pool/train_pool.jsonl").read_text().splitlines()
    assert 0 < manifest["counts"]["plan"]["problems"] < len(pool)
    # the step left out iteration 1's two rounds (r0 and its correction round)
    assert sorted(n for n in manifest["input_digests"] if n.startswith("solved_before")) == [
        "solved_before_0_generations",
        "solved_before_0_verdicts",
        "solved_before_1_generations",
        "solved_before_1_verdicts",
    ]


def test_the_sft_shards_record_every_pool_round_they_were_made_from(finished):
    """Iteration 2's shards come from its two rounds (r0, r1): each generations and verdicts
    file is an input of its own (before, both rounds' files shared one name and the second
    replaced the first: a changed r0 would not have made the shards stale)."""
    manifest = json.loads((finished["data"] / "sft_shards/iteration-2/manifest.json").read_text())
    pool_rounds = [
        n for n in manifest["input_digests"] if n.endswith(("generations.jsonl", "verdicts.jsonl"))
    ]
    assert sorted(pool_rounds) == [
        "r0/iteration-2/generations.jsonl",
        "r0/iteration-2/verdicts.jsonl",
        "r1/iteration-2/generations.jsonl",
        "r1/iteration-2/verdicts.jsonl",
    ]
    assert len(manifest["inputs"]) == len(manifest["input_digests"]) == 6  # and pool, sets


def test_the_shards_are_judged_by_the_rounds_they_were_made_from_not_by_the_config_now(finished):
    """Iteration 2's shards come from its own rounds (`sft_data: iteration`); their
    `read_back_exact` check, run after the config turned to `cumulative`, judges them against
    the generations their manifest records (before: against the config now's)."""
    from prover_assets.definitions import build_definitions

    raw = json.loads(json.dumps(finished["raw"]))
    raw["resources"]["experiment"]["config"]["spec"]["iteration"]["sft_data"] = "cumulative"
    raw["resources"]["experiment"]["config"]["preflight_override"] = "a check alone, no GPU"
    changed = finished["tmp"] / "cumulative.yaml"
    changed.write_text(yaml.safe_dump(raw))
    check = dg.AssetCheckKey(dg.AssetKey(["sft_shards"]), "read_back_exact")
    job = (
        build_definitions(changed)
        .resolve_job_def("sft")
        .get_subset(asset_selection=set(), asset_check_selection={check})
    )
    with dg.DagsterInstance.from_config(str(finished["home"])) as instance:
        judged = job.execute_in_process(
            run_config=raw, instance=instance, partition_key="2", raise_on_error=False
        )
    (evaluation,) = judged.get_asset_check_evaluations()
    assert evaluation.passed, evaluation.description
