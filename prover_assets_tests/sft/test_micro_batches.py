"""The Trainer's micro-batches: a rank reads its micro-steps in its order, a padding one is the
first micro-batch with nothing to learn, and a step is one packed row of tensors with no cache."""

from __future__ import annotations

import pytest
import torch

from prover_assets.sft.micro_batches import PackedDataset, RankDataset, collate
from prover_assets.sft.packing import Schedule
from prover_assets.sft.ranks import PADDING
from prover_assets.sft.shards import IGNORE_INDEX, SftDataset, ShardWriter
from prover_assets_tests.factories import make_sft_row


@pytest.fixture
def packed(tmp_path) -> PackedDataset:
    writer = ShardWriter(tmp_path)
    for i, ids in enumerate([[5, 6, 7, 8], [9, 10, 11]]):
        writer.write_row(make_sft_row(ids, prompt_len=2, sample_idx=i))
    writer.close()
    schedule = Schedule(((0,), (1,), (0, 1)), capacity=16, epochs=1, real_tokens=0)
    return PackedDataset(SftDataset(tmp_path), schedule)


def test_a_micro_batch_is_its_rows_concatenated_with_restarting_positions(packed):
    item = packed[2]
    assert item["input_ids"].tolist() == [5, 6, 7, 8, 9, 10, 11]
    assert item["position_ids"].tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert item["labels"].tolist() == [
        IGNORE_INDEX,
        IGNORE_INDEX,
        7,
        8,
        IGNORE_INDEX,
        IGNORE_INDEX,
        11,
    ]
    assert (len(packed), item["micro_step"]) == (3, 2)


def test_a_rank_reads_its_own_micro_steps_in_order_and_a_padding_one_learns_nothing(packed):
    rank = RankDataset(packed, [2, PADDING, 1])
    assert len(rank) == 3
    assert rank[0]["input_ids"].tolist() == packed[2]["input_ids"].tolist()
    padding = rank[1]
    assert padding["micro_step"] == PADDING
    assert padding["input_ids"].tolist() == packed[0]["input_ids"].tolist()
    assert set(padding["labels"].tolist()) == {IGNORE_INDEX}
    assert packed[0]["labels"].tolist() != padding["labels"].tolist()  # the first one untouched
    assert rank[2]["micro_step"] == 1


def test_a_step_is_one_row_of_the_micro_batch_without_a_cache(packed):
    batch = collate([packed[0]])
    assert batch["input_ids"].shape == batch["labels"].shape == (1, 4)
    assert batch["labels"][0].tolist() == [IGNORE_INDEX, IGNORE_INDEX, 7, 8]
    assert torch.equal(batch["position_ids"], torch.tensor([[0, 1, 2, 3]]))
    assert (batch["use_cache"], batch["micro_step"]) == (False, 0)
    assert "attention_mask" not in batch
