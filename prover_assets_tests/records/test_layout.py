"""Generations', verdicts' and statement audits' keys end in a label naming the whole output
(kind, system, set, cap, seed), while their folders keep the data root's layout: the two map one
to one, and every other asset's folder is its key."""

import pytest

from prover_assets.records.layout import folder_path, key_path, legacy_key_path

# folder under the data root -> asset key, written out by hand.
LAYOUT = {
    "generations/minif2f/baseline/c256": "generations/minif2f/baseline/"
    "generations_baseline_minif2f_c256",
    "verdicts/mobench_full/candidate_seed7/c16384": "verdicts/mobench_full/candidate_seed7/"
    "verdicts_candidate_mobench_full_c16384_seed7",
    "generations/pool/r0": "generations/pool/generations_pool_r0",
    "verdicts/pool/r1": "verdicts/pool/verdicts_pool_r1",
    "generations/x": "generations/generations_x",
    "eval_problems/minif2f": "eval_problems/minif2f",
    "statement_audit/minif2f": "statement_audit/statement_audit_minif2f",
    "sft_checkpoint_seed7": "sft_checkpoint_seed7",
    "pool/generations/r0": "pool/generations/r0",
}
PAIRS = [(tuple(folder.split("/")), tuple(key.split("/"))) for folder, key in LAYOUT.items()]


@pytest.mark.parametrize(("folder", "key"), PAIRS)
def test_a_folders_key_and_a_keys_folder_are_each_others(folder, key):
    assert key_path(folder) == key
    assert folder_path(key) == folder


@pytest.mark.parametrize(("folder", "key"), PAIRS)
def test_the_legacy_key_is_the_folder_of_a_renamed_key_and_none_of_another(folder, key):
    assert legacy_key_path(key) == (folder if folder != key else None)


@pytest.mark.parametrize(
    "key",
    [
        ("generations", "pool", "r0"),  # the old key: no label
        ("generations", "pool", "verdicts_pool_r0"),  # another kind's label
        ("verdicts", "minif2f", "baseline", "verdicts_candidate_minif2f_c256"),  # another system
        ("generations", "pool", "generations_pool_"),  # names nothing
        ("verdicts", "minif2f", "candidate_seed7", "verdicts_candidate_minif2f_c256"),  # no seed
    ],
)
def test_a_generations_or_verdicts_key_whose_label_does_not_name_its_path_is_refused(key):
    with pytest.raises(ValueError, match="the last part of a"):
        folder_path(key)


def test_the_refusal_names_the_key_and_the_label_its_path_asks_for():
    key = ("verdicts", "minif2f", "candidate_seed7", "c256")
    with pytest.raises(ValueError) as refused:
        folder_path(key)
    assert str(refused.value) == (
        "asset key verdicts/minif2f/candidate_seed7/c256: the last part of a verdicts key is "
        "verdicts_candidate_minif2f_<cap or round>_seed7, not c256"
    )
