"""The curated list of known statement defects: every entry validated at load, refusals naming
the file and line."""

from __future__ import annotations

import json

import pytest

from prover_assets.problems.defects import (
    DefectKind,
    KnownDefect,
    known_defects_of,
    load_known_defects,
)
from prover_assets.records.store import RecordError

IDS = {"mathd_numbertheory_618", "aime_1994_p3", "mathd_algebra_314"}


def entry(**changes) -> dict:
    return {
        "problem_id": "mathd_numbertheory_618",
        "kind": "false",
        "description": "lacks n > 0: false at n = 0",
        "source": "yangky11/miniF2F-lean4#33",
        **changes,
    }


def written(tmp_path, *entries) -> object:
    path = tmp_path / "defects.jsonl"
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries))
    return path


def test_a_valid_list_loads_every_entry_in_order(tmp_path):
    path = written(tmp_path, entry(), entry(problem_id="mathd_algebra_314", kind="trivial"))
    assert load_known_defects(path, IDS) == [
        KnownDefect(
            problem_id="mathd_numbertheory_618",
            kind=DefectKind.FALSE,
            description="lacks n > 0: false at n = 0",
            source="yangky11/miniF2F-lean4#33",
        ),
        KnownDefect(
            problem_id="mathd_algebra_314",
            kind=DefectKind.TRIVIAL,
            description="lacks n > 0: false at n = 0",
            source="yangky11/miniF2F-lean4#33",
        ),
    ]


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        (
            entry(problem_id="imo_2099_p1"),
            "problem_id 'imo_2099_p1' is not a problem of the eval set",
        ),
        (entry(kind="wrong"), "kind: Input should be"),
        (entry(description="  "), "description: String should have at least 1 character"),
        (entry(source=""), "source: String should have at least 1 character"),
        (entry(note="extra"), "note: Extra inputs are not permitted"),
        (entry(), "duplicate key ('mathd_numbertheory_618', <DefectKind.FALSE: 'false'>)"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_file_line_and_field(tmp_path, bad, named):
    path = written(tmp_path, entry(), bad)
    with pytest.raises(RecordError) as refused:
        load_known_defects(path, IDS)
    assert str(refused.value).startswith(f"{path}:2: ")
    assert named in str(refused.value)


# The registered miniF2F copy's known defects, by hand from the sources the list names
# (prover_assets/data/defects/README.md): two false statements, four misformalised ones.
REGISTERED_MINIF2F = {
    ("amc12a_2021_p25", "false"),
    ("imo_1982_p1", "false"),
    ("imo_1981_p6", "misformalised"),
    ("mathd_algebra_76", "misformalised"),
    ("mathd_numbertheory_3", "misformalised"),
    ("amc12_2000_p6", "misformalised"),
}


def registered_eval_sets():
    from prover_assets.config import load_run_config
    from prover_assets_tests.support import CONFIGS

    return load_run_config(CONFIGS / "p2.yaml").experiment.eval_sets


def test_the_registered_copies_have_their_known_defects():
    eval_sets = registered_eval_sets()
    listed = known_defects_of(eval_sets["minif2f"], ALL)
    assert {(d.problem_id, d.kind.value) for d in listed.defects} == REGISTERED_MINIF2F
    assert listed.path.name == "goedel-prover-v2-minif2f.jsonl"
    mobench = known_defects_of(eval_sets["mobench"], ALL).defects
    assert {(d.problem_id, d.kind.value) for d in mobench} == {
        ("Usa1993P3", "false"),
        ("Imo2022P3", "false"),
        ("Imo2023P2", "false"),
    }


def test_only_the_defects_among_the_kept_problems_are_given():
    kept = {"imo_1982_p1", "mathd_algebra_478"}
    listed = known_defects_of(registered_eval_sets()["minif2f"], kept)
    assert [(d.problem_id, d.kind) for d in listed.defects] == [("imo_1982_p1", DefectKind.FALSE)]


def test_another_copy_of_an_eval_file_has_no_known_defects():
    eval_set = registered_eval_sets()["minif2f"]
    other = eval_set.model_copy(
        update={"file": eval_set.file.model_copy(update={"sha256": "1" * 64})}
    )
    assert known_defects_of(other, ALL) is None


class _Everything:
    """Every problem id is kept."""

    def __contains__(self, problem_id: object) -> bool:
        return True


ALL = _Everything()
