"""Gates hold across runs: a step launched as a run of its own refuses an upstream output that
failed a blocking check in an earlier run, or that no blocking check judged, until the output
is made again or the run gives `gate_override` (which the report lists)."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.dagster_run import DagsterRun

from prover_assets.assets.keys import SFT_CHECKPOINT
from prover_assets.assets.metadata import OUTPUT_DIR
from prover_assets.assets.report import gate_overrides
from prover_assets.checks.gates import JUDGED_MANIFEST, latest_evaluation, upstream_findings
from prover_assets.checks.graph import blocking_checks_by_asset
from prover_assets.checks.sft import sft_checks
from prover_assets.config import ExperimentSpec, load_run_config
from prover_assets.definitions import build_definitions
from prover_assets.records.layout import folder_path
from prover_assets.records.outputs import StageResult, Step, StepInputs
from prover_assets.resources import ExperimentConfig, ExperimentResource
from prover_assets.sft.stages import TrainingResult
from prover_assets.sft.trainer import DATA_ORDER_FILE
from prover_assets_tests.factories import make_training_result
from prover_assets_tests.support import CONFIGS

READER = dg.AssetKey("reader")


def demo_spec(data_root: Path) -> ExperimentSpec:
    spec = load_run_config(CONFIGS / "demo.yaml").experiment
    training = spec.training.model_copy(update={"epochs": 1, "gradient_accumulation": 1})
    return spec.model_copy(update={"data_root": str(data_root), "training": training})


def checkpoint_asset(spec: ExperimentSpec, *, repeated: bool) -> dg.AssetsDefinition:
    """The `sft_checkpoint` output of a run that trained 2 rows once: each micro-step once, or
    (`repeated`) with one micro-step's line twice, as a faulty resume would leave it."""

    @dg.asset(key=SFT_CHECKPOINT)
    def checkpoint() -> dg.MaterializeResult:
        folder = Path(spec.data_root) / "sft_checkpoint"
        folder.mkdir(parents=True, exist_ok=True)
        order = [{"micro_step": 0, "rows": [0]}, {"micro_step": 1, "rows": [1]}]
        order += order[-1:] if repeated else []
        (folder / DATA_ORDER_FILE).write_text("".join(json.dumps(e) + "\n" for e in order))
        config = {"training": spec.training.model_dump(mode="json")}
        step = Step(folder, str(folder), TrainingResult, StepInputs.hash({}), config)
        result = make_training_result(status="done")
        step.finish(result, [folder / DATA_ORDER_FILE])
        return dg.MaterializeResult(metadata={OUTPUT_DIR: str(folder)})

    return checkpoint


@dg.asset(key=READER)
def reader(experiment: ExperimentResource) -> None:
    """A step of a later run that reads the checkpoint, as the export does, from a thread of
    its own as the verdict stream beside a generation step does."""
    failed: list[BaseException] = []

    def read() -> None:
        try:
            experiment.upstream_dir(SFT_CHECKPOINT)
        except BaseException as exc:  # the step fails with what the thread met
            failed.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


class Graph:
    """The checkpoint, its real `data_order` check and a reader in one code location, on one
    instance; each method is one run of one of its jobs."""

    def __init__(self, instance: dg.DagsterInstance, spec: ExperimentSpec) -> None:
        self.instance, self.spec = instance, spec
        (self.data_order,) = [c for c in sft_checks(spec) if "data_order" in str(c.check_keys)]

    def definitions(self, *, repeated: bool, gate_override: str = "") -> dg.Definitions:
        checkpoint = dg.AssetSelection.assets(SFT_CHECKPOINT)
        return dg.Definitions(
            assets=[checkpoint_asset(self.spec, repeated=repeated), reader],
            asset_checks=[self.data_order],
            jobs=[
                dg.define_asset_job("make", checkpoint),
                dg.define_asset_job("make_unchecked", checkpoint.without_checks()),
                dg.define_asset_job("read", [READER]),
            ],
            resources={"experiment": self.resource(gate_override)},
        )

    def make_checkpoint(
        self, *, repeated: bool, with_checks: bool = True
    ) -> dg.ExecuteInProcessResult:
        job = "make" if with_checks else "make_unchecked"
        return self._run(self.definitions(repeated=repeated), job)

    def read(self, gate_override: str = "") -> dg.ExecuteInProcessResult:
        return self._run(self.definitions(repeated=False, gate_override=gate_override), "read")

    def _run(self, definitions: dg.Definitions, job: str) -> dg.ExecuteInProcessResult:
        return definitions.resolve_job_def(job).execute_in_process(
            instance=self.instance, raise_on_error=False
        )

    def resource(self, gate_override: str = "") -> ExperimentResource:
        spec = ExperimentConfig(**self.spec.model_dump(mode="json"))
        return ExperimentResource(spec=spec, gate_override=gate_override)


def failure(result: dg.ExecuteInProcessResult) -> str:
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    return event.step_failure_data.error.message


@pytest.fixture
def graph(tmp_path):
    with dg.instance_for_test() as instance:
        yield Graph(instance, demo_spec(tmp_path / "data"))


def test_every_check_result_names_the_manifest_it_judged(graph):
    made = graph.make_checkpoint(repeated=False)
    (evaluation,) = made.get_asset_check_evaluations()
    manifest = Path(graph.spec.data_root) / "sft_checkpoint" / "manifest.json"
    assert (
        evaluation.metadata[JUDGED_MANIFEST].value
        == hashlib.sha256(manifest.read_bytes()).hexdigest()
    )


def test_a_run_is_tagged_with_the_host_its_processes_run_on(graph):
    graph.make_checkpoint(repeated=False)
    read = graph.read()  # a step with the experiment resource
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    assert graph.instance.get_run_by_id(read.run_id).tags["prover_assets/host"] == host


def test_a_check_failed_in_an_earlier_run_stops_a_later_run_that_reads_the_output(graph):
    made = graph.make_checkpoint(repeated=True)
    (evaluation,) = made.get_asset_check_evaluations()
    assert not evaluation.passed
    read = graph.read()
    assert not read.success
    message = failure(read)
    assert f"sft_checkpoint: check `data_order` failed in run {made.run_id}" in message
    assert evaluation.description in message
    assert "gate_override" in message


def test_an_output_no_blocking_check_judged_is_refused(graph):
    made = graph.make_checkpoint(repeated=False, with_checks=False)
    assert made.success and not made.get_asset_check_evaluations()
    read = graph.read()
    assert not read.success
    assert "sft_checkpoint: check `data_order` never ran on this materialization" in failure(read)


@pytest.mark.slow
def test_a_new_materialization_that_passes_clears_the_failure(graph):
    graph.make_checkpoint(repeated=True)
    assert not graph.read().success
    remade = graph.make_checkpoint(repeated=False)
    assert all(e.passed for e in remade.get_asset_check_evaluations())
    assert graph.read().success


@pytest.mark.slow
def test_a_passing_check_on_an_older_manifest_does_not_hold_for_a_new_one(graph):
    graph.make_checkpoint(repeated=False)
    assert graph.read().success
    graph.make_checkpoint(repeated=True, with_checks=False)  # the data changed, unjudged
    assert not graph.read().success


def test_a_gate_override_reads_past_the_failure_and_says_so(graph):
    graph.make_checkpoint(repeated=True)
    read = graph.read(gate_override="known duplicate, measuring its effect")
    assert read.success
    warnings = [
        e.message
        for e in graph.instance.all_logs(read.run_id)
        if e.level == 30 and "gate_override" in (e.message or "")  # logging.WARNING
    ]
    assert warnings and "check `data_order` failed" in warnings[0]


def test_the_gates_are_the_graphs_blocking_checks():
    built = build_definitions(CONFIGS / "demo.yaml").get_repository_def().asset_graph
    expected: dict[dg.AssetKey, set[str]] = {}
    for key in built.asset_check_keys:
        if built.get_check_spec(key).blocking:
            expected.setdefault(key.asset_key, set()).add(key.name)
    assert {k: set(v) for k, v in blocking_checks_by_asset(demo_spec(Path("/d"))).items()} == (
        expected
    )


@pytest.mark.slow
def test_the_evaluation_of_a_manifest_is_found_past_many_later_ones_of_others(shared_instance):
    key = dg.AssetKey(["many_evaluations"])

    def evaluate(judged: str, passed: bool) -> None:
        shared_instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=key, check_name="c", passed=passed, metadata={JUDGED_MANIFEST: judged}
            )
        )

    evaluate("a" * 64, False)
    evaluate("a" * 64, True)  # judged again: the latest holds
    for i in range(120):  # more than a page of other outputs' evaluations since
        evaluate(f"{i:064d}", False)
    found = latest_evaluation(shared_instance, dg.AssetCheckKey(key, "c"), "a" * 64)
    assert found is not None and found.passed
    assert latest_evaluation(shared_instance, dg.AssetCheckKey(key, "c"), "b" * 64) is None


def test_runs_that_read_past_a_gate_are_listed_for_the_report():
    with dg.instance_for_test() as instance:
        for job, reason in (("candidate_eval", "known infra share"), ("report", "")):
            config = {"resources": {"experiment": {"config": {"gate_override": reason}}}}
            instance.add_run(DagsterRun(job_name=job, run_id=str(uuid.uuid4()), run_config=config))
        (line,) = gate_overrides(instance)
    assert "(job candidate_eval," in line and line.endswith(": known infra share")


DEMO_GATES = sorted(
    (key.to_user_string(), name)
    for key, names in blocking_checks_by_asset(demo_spec(Path("/d"))).items()
    for name in names
)


def output_at(folder: Path, inputs: dict[str, Path]) -> Path:
    """A complete output in `folder` made from `inputs`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.jsonl").write_text("{}\n")
    step = Step(folder, str(folder), Written, StepInputs.hash(inputs), {})
    step.finish(Written(rows=1), [folder / "rows.jsonl"])
    return folder


class Written(StageResult):
    rows: int


@pytest.fixture(scope="module")
def shared_instance():
    # Evaluations are told apart by the manifest they judged, unique to each test's output.
    with dg.instance_for_test() as instance:
        yield instance


@pytest.mark.slow
@pytest.mark.parametrize(("asset", "check"), DEMO_GATES)
def test_each_gate_of_the_graph_failed_upstream_stops_a_reader_downstream(
    tmp_path, shared_instance, asset, check
):
    """Every blocking check of the demo graph, failed on the output a reader's input came from
    (a failed evaluation of its manifest, as its run records one), is found by the reader."""
    root = tmp_path / "data"
    key = dg.AssetKey.from_user_string(asset)
    upstream = output_at(root.joinpath(*folder_path(tuple(key.path))), {})
    reader_folder = output_at(root / "reader", {"input": upstream / "rows.jsonl"})
    judged = hashlib.sha256((upstream / "manifest.json").read_bytes()).hexdigest()
    blocking = blocking_checks_by_asset(demo_spec(root))
    for name in blocking[key]:
        shared_instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=name,
                passed=name != check,
                metadata={JUDGED_MANIFEST: judged},
                description=f"{name} judged it",
            )
        )
    findings = upstream_findings(shared_instance, blocking, root, reader_folder)
    assert [(f.output.asset, f.check, f.evaluation.passed) for f in findings] == [
        (tuple(key.path), check, False)
    ]


def planned(instance: dg.DagsterInstance, key: dg.AssetKey, check: str) -> None:
    """A run starting `check` on `key` now: its execution is planned, not yet evaluated."""
    from dagster._core.definitions.asset_checks.asset_check_evaluation import (
        AssetCheckEvaluationPlanned,
    )
    from dagster._core.events import DagsterEvent, DagsterEventType
    from dagster._core.events.log import EventLogEntry

    event = DagsterEvent(
        event_type_value=DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED.value,
        job_name="reader_job",
        event_specific_data=AssetCheckEvaluationPlanned(asset_key=key, check_name=check),
    )
    instance.store_event(
        EventLogEntry(
            error_info=None,
            level=10,
            user_message="",
            run_id=str(uuid.uuid4()),
            timestamp=0.0,
            dagster_event=event,
        )
    )


# A check's executions on the output read ("this") and on a later one ("other"), oldest first:
# True passed, False failed, None still running; and what the reader finds, by hand.
HISTORIES = [
    ([("this", True)], None),
    ([("this", False)], "failed"),
    ([("this", False), ("this", True)], None),
    ([("this", True), ("this", False)], "failed"),
    ([("this", True), ("other", False)], None),  # the latest judged another output
    ([("this", False), ("other", True)], "failed"),
    ([("other", True)], "never judged"),
    ([("this", True), ("this", None)], None),  # the latest is running: the last completed holds
    ([("this", False), ("this", None)], "failed"),
    ([("this", None)], "never judged"),
]


@pytest.mark.parametrize(("history", "expected"), HISTORIES)
def test_a_reader_finds_what_the_latest_completed_evaluation_of_its_input_said(
    tmp_path, shared_instance, history, expected
):
    root = tmp_path / "data"
    key = dg.AssetKey(["sft_shards"])
    upstream = output_at(root / "sft_shards", {})
    reader_folder = output_at(root / "reader", {"input": upstream / "rows.jsonl"})
    this = hashlib.sha256((upstream / "manifest.json").read_bytes()).hexdigest()
    other = hashlib.sha256(str(tmp_path).encode()).hexdigest()  # unique to the test
    check = dg.AssetCheckKey(key, f"c-{uuid.uuid4().hex}")
    for judged, passed in history:
        if passed is None:
            planned(shared_instance, key, check.name)
            continue
        shared_instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=check.name,
                passed=passed,
                metadata={JUDGED_MANIFEST: this if judged == "this" else other},
            )
        )
    findings = upstream_findings(shared_instance, {key: [check.name]}, root, reader_folder)
    found = [
        "never judged" if f.evaluation is None else "failed"
        for f in findings
        if f.check == check.name
    ]
    assert found == ([] if expected is None else [expected])


# Evaluations of the output read under the key it was made under before generations and
# verdicts were labelled, then under its key now, oldest first; what the reader finds, by hand.
RENAMED_HISTORIES = [
    ([("legacy", False)], "failed"),
    ([("legacy", True)], None),
    ([("legacy", False), ("now", True)], None),  # judged again since the rename
    ([("legacy", True), ("now", False)], "failed"),
    ([], "never judged"),
]


@pytest.mark.parametrize(("history", "expected"), RENAMED_HISTORIES)
def test_a_check_judged_under_the_key_before_labelling_still_gates_the_output(
    tmp_path, shared_instance, history, expected
):
    root = tmp_path / "data"
    renamed = {
        "legacy": dg.AssetKey(["verdicts", "pool", "r0"]),
        "now": dg.AssetKey(["verdicts", "pool", "verdicts_pool_r0"]),
    }
    upstream = output_at(root / "verdicts" / "pool" / "r0", {})
    reader_folder = output_at(root / "reader", {"input": upstream / "rows.jsonl"})
    judged = hashlib.sha256((upstream / "manifest.json").read_bytes()).hexdigest()
    name = f"c-{uuid.uuid4().hex}"
    for key, passed in history:
        shared_instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=renamed[key],
                check_name=name,
                passed=passed,
                metadata={JUDGED_MANIFEST: judged},
            )
        )
    blocking = {renamed["now"]: [name]}
    findings = upstream_findings(shared_instance, blocking, root, reader_folder)
    found = ["never judged" if f.evaluation is None else "failed" for f in findings]
    assert found == ([] if expected is None else [expected])
