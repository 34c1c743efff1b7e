"""Gates hold across runs, fault by fault: on a copy of the finished demo (`finished_round`), one
output is changed as a real fault would leave it, its manifest rewritten to match (so that only
a check can tell); the output is recorded as materialized, as the step that wrote it records it,
and a first run executes the named blocking check on it (as the asset page's "Execute" does),
which fails; then the step that reads the output next, launched as a run of its own, refuses it,
naming the check and that run. One case for every blocking check of the graph's kinds of output (the eval
set, the pool's candidates, generations, corrections, verdicts, the SFT shards, the checkpoint,
the export).

`reference_elaborates` has no case here: under the demo's simulated verifier every statement
elaborates (the simulator answers `by sorry` with its warning), so no fault of the data makes it
fail; its failure across runs is `checks/test_gates.py`'s recorded-evaluation case, and its rule
`verify/test_elaboration.py`'s."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import yaml

from prover_assets.assets.metadata import OUTPUT_DIR
from prover_assets.definitions import build_definitions
from prover_assets.lean.statements import alpha_sha, statement_sha
from prover_assets.records.layout import folder_path
from prover_assets_tests.output_faults import Rows, recount, repeated_micro_step, rewrite, rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def duplicate_first(parsed: Rows) -> None:
    parsed.append(dict(parsed[0]))


def unparsable_statement(parsed: Rows) -> None:
    # a second theorem after the first: the record's contract holds (hashed as the builder
    # hashes it), but the statement no longer splits into one header and one theorem
    row = parsed[0]
    row["formal_statement"] += "\n\ntheorem another_one : True := by sorry"
    row["statement_sha"] = statement_sha(row["formal_statement"])
    row["alpha_sha"] = alpha_sha(row["formal_statement"])


def statement_with_a_double_space(parsed: Rows) -> None:
    # still lexes and splits, but is no longer Goedel's rule of its source byte for byte
    for row in parsed:
        row["formal_statement"] = row["formal_statement"].replace("theorem ", "theorem  ", 1)


def drop_last(parsed: Rows) -> None:
    parsed.pop()


def sample_past_n(parsed: Rows) -> None:
    parsed[-1]["sample_idx"] = 1000  # the problem is left one sample short of n


def hotter_first_sample(parsed: Rows) -> None:
    parsed[0]["sampling"]["temperature"] += 0.1


def orphan_child(parsed: Rows) -> None:
    parsed[0]["parent"]["sample_idx"] = 1000  # a parent no round-0 sample is


def another_repl_rev(parsed: Rows) -> None:
    parsed[-1]["verifier"]["pins"]["repl_rev"] += " (another build)"


def infrastructure(parsed: Rows) -> None:
    for row in parsed[:3]:  # 3 of 120: past the 1 % bound
        row.update(accepted=False, stage="infrastructure", reasons=["infrastructure"])


def capped_keys(generations: Path) -> list[tuple[str, int, int]]:
    """The samples of `generations` cut at their token cap."""
    return [
        (g["problem_id"], g["sample_idx"], g["round"])
        for g in map(json.loads, generations.read_text().splitlines())
        if g["finish_reason"] == "length"
    ]


def accept(capped: tuple[str, int, int]) -> Callable[[Rows], None]:
    def change(parsed: Rows) -> None:
        for row in parsed:
            if (row["problem_id"], row["sample_idx"], row["round"]) == capped:
                row.update(accepted=True, stage="accepted", reasons=[])

    return change


def half_dead_chunk(parsed: Rows) -> None:
    parsed[0]["infrastructure"] = parsed[0]["samples"]


def outside_the_pool(parsed: Rows) -> None:
    parsed[0]["problem_id"] = "not-a-pool-problem"


def retokenized(root: Path) -> Callable[[bytes], bytes]:
    """One completion token of the first SFT row changed in its shard."""
    first = json.loads((root / "sft_shards" / "rows.jsonl").read_text().splitlines()[0])

    def change(data: bytes) -> bytes:
        tokens = np.frombuffer(data, dtype=np.uint32).copy()
        tokens[first["offset"] + first["length"] - 1] += 1
        return tokens.tobytes()

    return change


@dataclass(frozen=True)
class Fault:
    """A real fault of one output: `check` fails on it; `reader` is the next step to read it."""

    output: str
    check: str
    reader: str
    make: Callable[[Path, Path], None]  # (data root, the output's folder)

    def __str__(self) -> str:
        return f"{self.output}:{self.check}"


def in_file(name: str, change: Callable[[Rows], None]) -> Callable[[Path, Path], None]:
    return lambda root, folder: rewrite(folder, name, rows(change))


def in_counts(change: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    return lambda root, folder: recount(folder, change)


def more(field: str, *inner: str) -> Callable[[dict], None]:
    def change(counts: dict) -> None:
        for name in inner:
            counts = counts[name]
        counts[field] += 1

    return change


EVAL, BASELINE, CANDIDATE = (
    "eval_problems/minif2f",
    "generations/minif2f/baseline/generations_baseline_minif2f_c256",
    "generations/minif2f/candidate/generations_candidate_minif2f_c256",
)
POOL_VERDICTS = "verdicts/pool/verdicts_pool_r0"
FAULTS = [
    Fault(EVAL, "counts_reconcile", BASELINE, in_counts(more("rows_in"))),
    Fault(EVAL, "ids_unique", BASELINE, in_file("problems.jsonl", duplicate_first)),
    Fault(EVAL, "statements_parse", BASELINE, in_file("problems.jsonl", unparsable_statement)),
    Fault(
        EVAL,
        "goedel_normalisation",
        BASELINE,
        in_file("problems.jsonl", statement_with_a_double_space),
    ),
    Fault("train_pool_candidates", "counts_reconcile", "train_pool", in_counts(more("rows_in"))),
    Fault(
        BASELINE,
        "rows_satisfy_contract",
        "verdicts/minif2f/baseline/verdicts_baseline_minif2f_c256",
        in_file("generations.jsonl", drop_last),
    ),
    Fault(
        BASELINE,
        "samples_per_problem",
        "verdicts/minif2f/baseline/verdicts_baseline_minif2f_c256",
        in_file("generations.jsonl", sample_past_n),
    ),
    Fault(
        CANDIDATE,
        "design_match",
        "verdicts/minif2f/candidate/verdicts_candidate_minif2f_c256",
        in_file("generations.jsonl", hotter_first_sample),
    ),
    Fault(
        "generations/pool/generations_pool_r1",
        "children_have_failed_parents",
        "verdicts/pool/verdicts_pool_r1",
        in_file("generations.jsonl", orphan_child),
    ),
    Fault(
        POOL_VERDICTS,
        "verifier_identical",
        "sft_shards",
        in_file("verdicts.jsonl", another_repl_rev),
    ),
    Fault(
        POOL_VERDICTS,
        "verdicts_cover_generations",
        "sft_shards",
        in_file("verdicts.jsonl", drop_last),
    ),
    Fault(
        POOL_VERDICTS,
        "infrastructure_within_bound",
        "sft_shards",
        in_file("verdicts.jsonl", infrastructure),
    ),
    Fault(
        POOL_VERDICTS, "no_chunk_half_dead", "sft_shards", in_file("chunks.jsonl", half_dead_chunk)
    ),
    Fault("sft_shards", "at_least_one_row", "sft_checkpoint", in_file("rows.jsonl", list.clear)),
    Fault("sft_shards", "counts_reconcile", "sft_checkpoint", in_counts(more("written", "counts"))),
    Fault("sft_shards", "no_eval_leak", "sft_checkpoint", in_file("rows.jsonl", outside_the_pool)),
    Fault(
        "sft_shards",
        "read_back_exact",
        "sft_checkpoint",
        lambda root, folder: rewrite(folder, "tokens-00000.bin", retokenized(root)),
    ),
    Fault(
        "sft_checkpoint",
        "data_order",
        "exported_model",
        in_file("data_order.jsonl", repeated_micro_step),
    ),
    Fault(
        "exported_model",
        "logprob_parity",
        CANDIDATE,
        in_counts(lambda counts: counts.update(merge_max_abs_diff=0.01)),
    ),
]


@dataclass(frozen=True)
class Copy:
    """A data root the faults change, at one path (so one code location serves every case)."""

    root: Path
    definitions: dg.Definitions
    home: Path

    def reset(self, source: Path) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.copytree(source, self.root, symlinks=True)

    def run(self, instance: dg.DagsterInstance, selection: dg.AssetSelection, name: str):
        job = dg.define_asset_job(name, selection).resolve(
            asset_graph=self.definitions.resolve_asset_graph()
        )
        return job.execute_in_process(instance=instance, raise_on_error=False)


@pytest.fixture(scope="module")
def copy(finished_round, tmp_path_factory) -> Copy:
    tmp = tmp_path_factory.mktemp("faults")
    raw = json.loads(json.dumps(finished_round["raw"]))
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = str(tmp / "data")
    config = tmp / "faults.yaml"
    config.write_text(yaml.safe_dump(raw))
    return Copy(tmp / "data", build_definitions(config), finished_round["home"])


def step_failure(result) -> str:
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    return event.step_failure_data.error.message


@pytest.mark.parametrize("fault", FAULTS, ids=str)
def test_a_check_failed_by_a_real_fault_stops_the_next_step_in_a_run_of_its_own(
    finished_round, copy, fault
):
    planted_and_read(finished_round, copy, fault)


# Where a demo run may have cut a sample at its cap (how many it cuts varies from run to run):
# each verdict stream, the folder of its generations, and the step that reads it.
CAPPED_STREAMS = [
    (
        "verdicts/minif2f/candidate/verdicts_candidate_minif2f_c256",
        "generations/minif2f/candidate/c256",
        "eval_report",
    ),
    (
        "verdicts/minif2f/baseline/verdicts_baseline_minif2f_c256",
        "generations/minif2f/baseline/c256",
        "eval_report",
    ),
    ("verdicts/pool/verdicts_pool_r0", "generations/pool/r0", "sft_shards"),
    ("verdicts/pool/verdicts_pool_r1", "generations/pool/r1", "sft_shards"),
]


def test_an_accepted_length_capped_sample_stops_the_next_step_in_a_run_of_its_own(
    finished_round, copy
):
    root = finished_round["root"]
    found = [
        (output, capped[0], reader)
        for output, generations, reader in CAPPED_STREAMS
        if (capped := capped_keys(root / generations / "generations.jsonl"))
    ]
    if not found:
        pytest.skip("this demo run cut no sample at its cap in any stream: none to accept")
    output, capped, reader = found[0]
    fault = Fault(
        output, "no_length_capped_accepted", reader, in_file("verdicts.jsonl", accept(capped))
    )
    planted_and_read(finished_round, copy, fault)


def planted_and_read(finished_round, copy, fault: Fault) -> None:
    """`fault` planted in a fresh copy of the finished demo, its check run, then its reader run
    as a run of its own: refused, naming the check and the run that failed it."""
    copy.reset(finished_round["root"])
    output = dg.AssetKey.from_user_string(fault.output)
    folder = copy.root.joinpath(*folder_path(tuple(output.path)))
    fault.make(copy.root, folder)
    with dg.DagsterInstance.from_config(str(copy.home)) as instance:
        # as the step that wrote it records its output (some steps, run again, would repair or
        # refuse their own faulty output before their checks ran: the fault is what they left)
        instance.report_runless_asset_event(
            dg.AssetMaterialization(output, metadata={OUTPUT_DIR: str(folder)})
        )
        check = dg.AssetCheckKey(output, fault.check)
        judged = copy.run(instance, dg.AssetSelection.checks(check), "check_it")
        evaluations = judged.get_asset_check_evaluations()
        assert [(e.check_name, e.passed) for e in evaluations] == [(fault.check, False)], [
            e.description for e in evaluations
        ]
        reader = dg.AssetKey.from_user_string(fault.reader)
        read = copy.run(instance, dg.AssetSelection.assets(reader).without_checks(), "read_it")
    assert not read.success
    refusal = step_failure(read)
    assert f"refusing to read {folder}:" in refusal, refusal
    assert f"{fault.output}: check `{fault.check}` failed in run {judged.run_id}" in refusal, (
        refusal
    )
