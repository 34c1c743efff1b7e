"""The shipped pre-registration: hashed, consistent with the registered config and the power."""

from pathlib import Path

import pytest

from prover_assets.config import load_run_config
from prover_assets.report.prereg import PreregError, read_prereg
from prover_assets.stats import mcnemar_power

CONFIGS = Path(__file__).parents[2] / "configs"


@pytest.fixture(scope="module")
def prereg():
    return read_prereg(CONFIGS / "prereg.md")


def test_shipped_block_matches_its_recorded_hash(prereg):
    assert prereg.hash_matches


def test_registered_numbers_are_the_registered_configs(prereg):
    design = prereg.design
    config = load_run_config(CONFIGS / "p2.yaml")
    spec = config.experiment
    assert design.baseline_revision == spec.model.revision
    assert (design.temperature, design.top_p, design.top_k) == (
        spec.generation.temperature,
        spec.generation.top_p,
        spec.generation.top_k,
    )
    assert design.n_samples == spec.generation.n_samples
    assert design.cap_tokens == spec.report.primary_cap
    assert design.k == spec.report.k
    assert design.alpha == spec.report.alpha
    assert design.problem_set == spec.report.primary_set
    assert design.problems_sha256 == spec.eval_sets["minif2f"].file.sha256
    assert design.verifier.budget_s == config.lean.budget_s
    expected = config.lean.expected_pins
    assert (
        design.verifier.lean_version,
        design.verifier.mathlib_rev,
        design.verifier.repl_rev,
    ) == (expected["lean_version"], expected["mathlib_rev"], expected["repl_rev"])


def test_printed_power_table_is_what_mcnemar_power_computes(prereg):
    rows = [line for line in prereg.block.splitlines() if line.startswith("| 0.")]
    assert len(rows) == 3
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        fraction = float(cells[0])
        for gain, printed in zip((2, 4, 6, 8), cells[1:], strict=True):
            assert float(printed) == pytest.approx(
                mcnemar_power(244, fraction, gain / 100), abs=5e-4
            )


def test_a_file_without_markers_is_refused(tmp_path):
    path = tmp_path / "prereg.md"
    path.write_text("# nothing registered\n")
    with pytest.raises(PreregError, match="exactly one"):
        read_prereg(path)
