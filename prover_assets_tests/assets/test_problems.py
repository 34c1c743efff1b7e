"""The problem assets materialized in-process on the demo config, with their checks."""

import json
import re
import shutil

import dagster as dg
import pytest
import yaml

from prover_assets.definitions import build_definitions
from prover_assets_tests.support import demo_run_config

PROBLEM_JOB = "problems"


def materialize(tmp_path, **spec_overrides):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(demo_run_config(tmp_path / "data", **spec_overrides)))
    defs = build_definitions(path)
    return defs.resolve_job_def(PROBLEM_JOB).execute_in_process(raise_on_error=False)


def failure_text(result) -> str:
    """The first step failure, with its cause chain (the domain error is the cause)."""
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    return failure.step_failure_data.error.to_string()


def check_results(result):
    return {
        (
            e.asset_check_evaluation_data.asset_key.to_user_string(),
            e.asset_check_evaluation_data.check_name,
        ): e.asset_check_evaluation_data.passed
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


@pytest.mark.slow  # more than 1.8 s on the 2-core machine
def test_problem_job_materializes_and_every_check_passes(tmp_path):
    result = materialize(tmp_path)
    assert result.success
    checks = check_results(result)
    assert checks and all(checks.values()), checks
    assert ("eval_problems/minif2f", "goedel_normalisation") in checks
    data = tmp_path / "data"
    assert len((data / "eval_problems/minif2f/problems.jsonl").read_text().splitlines()) == 6
    # the shipped list's defects among the 6 kept (the first 6 of the file): of the six known
    # ones (prover_assets_tests/problems/test_defects.py), the sixth problem, mathd_numbertheory_3
    metadata = result.asset_materializations_for_node("eval_problems__minif2f")[0].metadata
    records = metadata["known_defects"].value.records
    assert [(r.data["problem_id"], r.data["kind"]) for r in records] == [
        ("mathd_numbertheory_3", "misformalised")
    ]
    manifest = json.loads((data / "train_pool_candidates/manifest.json").read_text())
    assert manifest["counts"]["rows_in"] == 60


@pytest.mark.slow
def test_a_reused_output_keeps_its_data_version_and_what_was_made_from_it_stays_synced(tmp_path):
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.loader import LoadingContextForTest

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(demo_run_config(tmp_path / "data")))
    defs = build_definitions(path)
    instance = dg.DagsterInstance.ephemeral()
    eval_set, made_from_it = (
        dg.AssetKey(["eval_problems", "minif2f"]),
        dg.AssetKey("decontamination_sets"),
    )

    def version_of(key):
        return instance.get_latest_materialization_event(key).asset_materialization.tags[
            "dagster/data_version"
        ]

    assert defs.resolve_job_def(PROBLEM_JOB).execute_in_process(instance=instance).success
    first = version_of(eval_set)
    # the eval set alone, again (as every job that selects it does): reused, the same version
    again = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, asset_selection=[eval_set]
    )
    assert again.success
    assert version_of(eval_set) == first

    def status_of(key):
        graph = defs.resolve_asset_graph()
        return CachingStaleStatusResolver(
            instance, graph, LoadingContextForTest(instance)
        ).get_status(key)

    assert status_of(made_from_it) == StaleStatus.FRESH
    # made again from scratch: a new manifest, a new version, and downstream is stale
    shutil.rmtree(tmp_path / "data" / "eval_problems" / "minif2f")
    defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, asset_selection=[eval_set]
    )
    assert version_of(eval_set) != first
    assert status_of(made_from_it) == StaleStatus.STALE


@pytest.mark.slow
def test_rerun_reuses_complete_and_current_outputs(tmp_path):
    materialize(tmp_path)
    first = (tmp_path / "data/train_pool_candidates/manifest.json").read_bytes()
    result = materialize(tmp_path)
    assert result.success
    metadata = result.asset_materializations_for_node("train_pool_candidates")[0].metadata
    assert metadata["reused_complete_output"].value is True
    assert (tmp_path / "data/train_pool_candidates/manifest.json").read_bytes() == first


@pytest.mark.slow
def test_changed_config_refuses_to_overwrite_a_stale_output(tmp_path):
    materialize(tmp_path)
    raw = demo_run_config(tmp_path / "data")
    raw["resources"]["experiment"]["config"]["spec"]["eval_sets"]["minif2f"]["limit"] = 5
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = (
        build_definitions(path)
        .resolve_job_def(PROBLEM_JOB)
        .execute_in_process(raise_on_error=False)
    )
    assert not result.success
    assert "never overwritten" in failure_text(result)


def test_eval_file_with_wrong_sha256_fails_and_publishes_nothing(tmp_path):
    raw = demo_run_config(tmp_path / "data")
    raw["resources"]["experiment"]["config"]["spec"]["eval_sets"]["minif2f"]["file"]["sha256"] = (
        "0" * 64
    )
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = (
        build_definitions(path)
        .resolve_job_def(PROBLEM_JOB)
        .execute_in_process(raise_on_error=False)
    )
    assert not result.success
    assert "the config records 0000" in failure_text(result)
    assert not (tmp_path / "data/eval_problems/minif2f").exists()


@pytest.mark.parametrize("bad_line", [b'{"name": "x",', b'{"name": 1}'])
def test_malformed_eval_file_fails_naming_file_and_line(tmp_path, bad_line):
    from prover_assets.problems.eval_sets import load_minif2f
    from prover_assets.records import RecordError
    from prover_assets_tests.support import ROOT

    source = (ROOT / "prover_assets/data/goedel-prover-v2/minif2f.jsonl").read_bytes().splitlines()
    path = tmp_path / "minif2f.jsonl"
    path.write_bytes(b"\n".join([*source[:3], bad_line, *source[3:]]) + b"\n")
    with pytest.raises(RecordError, match=r"minif2f\.jsonl:4:"):
        load_minif2f(path)


def test_duplicate_problem_id_in_eval_file_fails(tmp_path):
    from prover_assets.problems.eval_sets import load_minif2f
    from prover_assets.records import DuplicateKeyError
    from prover_assets_tests.support import ROOT

    source = (ROOT / "prover_assets/data/goedel-prover-v2/minif2f.jsonl").read_bytes().splitlines()
    path = tmp_path / "minif2f.jsonl"
    path.write_bytes(b"\n".join([*source[:5], source[2]]) + b"\n")
    with pytest.raises(DuplicateKeyError, match=r":6: duplicate key"):
        load_minif2f(path)


def _mobench_rows() -> list[dict]:
    from prover_assets_tests.support import ROOT

    path = ROOT / "prover_assets/data/goedel-prover-v2/MOBench.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _stands_alone(lean4_code: str) -> bool:
    """By hand: comments dropped, every line before the theorem is a header line."""
    text = re.sub(r"/-.*?-/", "", lean4_code, flags=re.DOTALL)
    before = text[: re.search(r"^theorem\s", text, flags=re.MULTILINE).start()]
    lines = [line.split("--")[0].strip() for line in before.splitlines()]
    return all(not line or line.startswith(("import ", "set_option ", "open ")) for line in lines)


def test_mobench_whole_holds_all_but_the_problem_whose_preamble_asserts_an_axiom():
    from prover_assets.problems.eval_sets import load_mobench
    from prover_assets_tests.support import ROOT

    rows = _mobench_rows()
    supported, unsupported = load_mobench(
        ROOT / "prover_assets/data/goedel-prover-v2/MOBench.jsonl"
    )
    with_axiom = {r["problem_id"] for r in rows if re.search(r"^axiom\s", r["lean4_code"], re.M)}
    assert len(supported) + len(unsupported) == len(rows) == 360
    assert {(u.problem_id, u.reason) for u in unsupported} == {
        (i, "preamble:axiom") for i in with_axiom
    }
    assert len(with_axiom) == 1
    assert len({p.problem_id for p in supported}) == len(supported) == 359


def test_mobench_without_preambles_is_exactly_the_registered_subset_of_theorems_that_stand_alone():
    from prover_assets.problems.eval_sets import load_mobench
    from prover_assets_tests.support import ROOT

    rows = _mobench_rows()
    supported, unsupported = load_mobench(
        ROOT / "prover_assets/data/goedel-prover-v2/MOBench.jsonl", preambles=False
    )
    alone = [r["problem_id"] for r in rows if _stands_alone(r["lean4_code"])]
    assert [p.problem_id for p in supported] == alone
    assert len(alone) == 135
    assert len(supported) + len(unsupported) == 360
    assert all(u.reason.startswith(("preamble_excluded:", "preamble:")) for u in unsupported)


def test_an_empty_eval_set_is_refused_unless_the_config_expects_it(tmp_path):
    from prover_assets.config import EvalSetSpec, InputFile
    from prover_assets.problems.stages import materialize_eval_set
    from prover_assets.records import sha256_file
    from prover_assets.records.outputs import EmptyOutputError

    empty = tmp_path / "minif2f.jsonl"
    empty.write_bytes(b"")
    file = InputFile(path=str(empty), sha256=sha256_file(empty))
    with pytest.raises(EmptyOutputError, match=r"eval set minif2f .* 0 rows"):
        materialize_eval_set("minif2f", EvalSetSpec(format="minif2f", file=file), tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists()
    expected = EvalSetSpec(format="minif2f", file=file, allow_empty=True)
    assert materialize_eval_set("minif2f", expected, tmp_path / "ok").result.supported == 0


def test_an_empty_problem_id_names_the_file_and_line(tmp_path):
    from prover_assets.problems.eval_sets import load_minif2f
    from prover_assets.records import RecordError
    from prover_assets_tests.support import ROOT

    source = (ROOT / "prover_assets/data/goedel-prover-v2/minif2f.jsonl").read_bytes().splitlines()
    row = json.loads(source[1])
    row["problem_id"] = ""
    path = tmp_path / "minif2f.jsonl"
    path.write_bytes(b"\n".join([source[0], json.dumps(row).encode()]) + b"\n")
    with pytest.raises(RecordError, match=r"minif2f\.jsonl:2:"):
        load_minif2f(path)


@pytest.mark.parametrize("problem_id", [" mathd_x", "mathd_x ", "\ufeffmathd_x", "mathd\ufeff_x"])
def test_an_id_padded_with_a_space_or_holding_a_bom_names_the_file_line_and_field(
    tmp_path, problem_id
):
    from prover_assets.problems.eval_sets import load_minif2f
    from prover_assets.records import RecordError
    from prover_assets_tests.support import ROOT

    source = (ROOT / "prover_assets/data/goedel-prover-v2/minif2f.jsonl").read_bytes().splitlines()
    row = json.loads(source[1])
    row["problem_id"] = problem_id
    path = tmp_path / "minif2f.jsonl"
    path.write_bytes(b"\n".join([source[0], json.dumps(row).encode()]) + b"\n")
    with pytest.raises(RecordError, match=r"minif2f\.jsonl:2:.*problem_id"):
        load_minif2f(path)


@pytest.mark.parametrize("loader", ["load_minif2f", "load_mobench"])
def test_a_source_with_one_problem_id_twice_is_refused_naming_file_and_line(tmp_path, loader):
    from prover_assets.problems import eval_sets
    from prover_assets.records.store import DuplicateKeyError
    from prover_assets_tests.support import ROOT

    name = "minif2f.jsonl" if loader == "load_minif2f" else "MOBench.jsonl"
    source = (ROOT / "prover_assets/data/goedel-prover-v2" / name).read_bytes().splitlines()
    path = tmp_path / name
    path.write_bytes(b"\n".join([source[0], source[1], source[0]]) + b"\n")
    problem_id = json.loads(source[0])["problem_id"]
    with pytest.raises(DuplicateKeyError, match=rf"{name}:3: duplicate key '{problem_id}'"):
        getattr(eval_sets, loader)(path)


def test_a_minif2f_statement_with_an_empty_type_is_refused_naming_file_line_and_id(tmp_path):
    from prover_assets.problems.eval_sets import EvalSetError, load_minif2f
    from prover_assets_tests.support import ROOT

    source = (ROOT / "prover_assets/data/goedel-prover-v2/minif2f.jsonl").read_bytes().splitlines()
    row = json.loads(source[2])
    row["lean4_code"] = row["lean4_code"][: row["lean4_code"].index("theorem")] + (
        "theorem broken : := by\n  sorry"
    )
    path = tmp_path / "minif2f.jsonl"
    path.write_bytes(b"\n".join([*source[:2], json.dumps(row).encode()]) + b"\n")
    with pytest.raises(EvalSetError) as refused:
        load_minif2f(path)
    assert str(refused.value).startswith(
        f"{path}:3: miniF2F problem {row['problem_id']} is unsupported (empty_type)"
    )


def test_the_statements_check_judges_a_stored_empty_type_by_the_loaders_rule(tmp_path):
    from prover_assets.problems.validity import check_statements_parse
    from prover_assets_tests.factories import make_problem

    good = make_problem("good")
    broken = make_problem("broken", "theorem broken : := by sorry")
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(p.model_dump_json() + "\n" for p in (good, broken)))
    outcome = check_statements_parse(path)
    assert not outcome.passed
    assert outcome.metadata["failures"] == ["broken: empty_type"]


def test_goedel_normalisation_check_holds_where_the_rule_applies_and_names_the_others(tmp_path):
    from prover_assets.problems.eval_sets import load_mobench
    from prover_assets.problems.validity import check_goedel_normalisation
    from prover_assets.records import publish_records
    from prover_assets_tests.support import ROOT

    source = ROOT / "prover_assets/data/goedel-prover-v2/MOBench.jsonl"
    problems, _ = load_mobench(source)
    publish_records(tmp_path / "problems.jsonl", problems)
    outcome = check_goedel_normalisation(source, tmp_path / "problems.jsonl")
    by_hand = [r["problem_id"] for r in _mobench_rows() if r["lean4_code"].count(":= by") != 1]
    assert outcome.passed
    assert outcome.description == (
        f"{359 - len(by_hand)} of {359 - len(by_hand)} byte-identical to Goedel's rule; "
        f"{len(by_hand)} where it does not apply"
    )
    assert outcome.metadata["goedel_rule_not_applicable"] == by_hand[:20]
    assert len(by_hand) == 7
