"""A generation step refuses what it cannot append to honestly: an empty batch, a stream that
holds samples outside its plan."""

import pytest

from prover_assets.generation.engines import SamplingSettings
from prover_assets.generation.runner import round0_specs
from prover_assets.generation.stages import GENERATIONS_FILE, Samples, materialize_generations
from prover_assets.records import Appender, Generation
from prover_assets.records.outputs import EmptyOutputError
from prover_assets.records.store import RecordError
from prover_assets_tests.factories import make_generation, make_problem

SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=None)


def no_engine():
    pytest.fail("the step opened an engine for a batch it should have refused")


def materialize(folder, samples):
    return materialize_generations(
        folder,
        samples,
        model_path=folder / "model",
        model_rev="rev",
        sampling=SAMPLING,
        base_seed=1,
        max_model_len=4096,
        commit_every=2,
        open_engine=no_engine,
        load_tokenizer=lambda _: None,
    )


def test_an_empty_batch_is_refused_unless_the_config_expects_it(tmp_path):
    with pytest.raises(EmptyOutputError, match="generation batch"):
        materialize(tmp_path / "gen", Samples([], {}, samples_per_problem=1))
    result = materialize(
        tmp_path / "expected", Samples([], {}, samples_per_problem=1, allow_empty=True)
    )
    assert result.result.rows == 0


def test_a_stream_holding_a_sample_outside_the_plan_is_refused_before_anything_is_appended(
    tmp_path,
):
    folder = tmp_path / "gen"
    folder.mkdir()
    planned = round0_specs([make_problem("p1")], 2, 64)
    with Appender(folder / GENERATIONS_FILE, Generation) as appender:
        appender.append_many([make_generation("p1", 0), make_generation("elsewhere", 0)])
    before = (folder / GENERATIONS_FILE).read_bytes()
    with pytest.raises(RecordError, match=r"generations.jsonl:2: sample \('elsewhere'"):
        materialize(folder, Samples(planned, {}, samples_per_problem=1))
    assert (folder / GENERATIONS_FILE).read_bytes() == before
