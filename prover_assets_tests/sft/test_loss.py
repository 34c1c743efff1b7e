"""The chunked loss against transformers' own loss on the tiny model: value and gradients."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from prover_assets.sft.loss import HiddenStatesTap, chunked_linear_cross_entropy
from prover_assets.sft.shards import IGNORE_INDEX

# fp32 sums over a few hundred tokens in another order: a few ulps of a loss near 7.
TOLERANCE = 1e-5


@pytest.fixture
def model(tiny_model_dir):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def packed_batch(vocab: int) -> dict[str, torch.Tensor]:
    """Two packed rows of 40 and 60 tokens: each a prompt (no loss) and a completion."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, vocab, (1, 100), generator=generator)
    labels = input_ids.clone()
    labels[0, :15] = IGNORE_INDEX  # row 1's prompt
    labels[0, 40:70] = IGNORE_INDEX  # row 2's prompt
    position_ids = torch.cat([torch.arange(40), torch.arange(60)]).unsqueeze(0)
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids}


def gradients(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("num_items", [None, 57])
def test_the_tapped_chunked_loss_equals_the_models_own_loss_and_gradients(model, num_items):
    batch = packed_batch(model.config.vocab_size)
    kwargs = {} if num_items is None else {"num_items_in_batch": torch.tensor(num_items)}
    plain = model(**batch, use_cache=False, **kwargs).loss
    plain.backward()
    expected = gradients(model)
    model.zero_grad()

    tap = HiddenStatesTap(model, chunk_tokens=16)
    labels = batch.pop("labels")
    outputs = model(**batch, use_cache=False)
    chunked = tap.loss(outputs, labels, **kwargs)
    chunked.backward()
    tap.remove()

    assert outputs.logits.shape[1] == 0  # the model computed no logits itself
    assert chunked.item() == pytest.approx(plain.item(), abs=TOLERANCE)
    got = gradients(model)
    assert got.keys() == expected.keys() and expected
    for name, gradient in expected.items():
        torch.testing.assert_close(got[name], gradient, atol=TOLERANCE, rtol=1e-4, msg=name)


def test_the_loss_is_the_hand_computed_next_token_cross_entropy():
    # Two positions carry a label; logits are hidden @ weight.T.
    hidden = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], requires_grad=True)
    weight = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    labels = torch.tensor([[IGNORE_INDEX, 1, IGNORE_INDEX]])
    # Position 0 predicts labels[1] = 1 from logits (1, 0, 0); position 1 predicts -100: none.
    expected = -torch.log(torch.exp(torch.tensor(0.0)) / (torch.e + 2))
    loss = chunked_linear_cross_entropy(hidden, weight, labels, chunk_tokens=1)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-6)


def test_a_micro_batch_without_loss_tokens_gives_zero_and_still_back_propagates(model):
    tap = HiddenStatesTap(model, chunk_tokens=8)
    batch = packed_batch(model.config.vocab_size)
    labels = torch.full_like(batch.pop("labels"), IGNORE_INDEX)
    loss = tap.loss(model(**batch, use_cache=False), labels, num_items_in_batch=torch.tensor(5))
    loss.backward()
    assert loss.item() == 0.0
    assert all(
        p.grad is not None and not p.grad.any() for p in model.parameters() if p.requires_grad
    )


def test_asking_for_the_loss_before_a_forward_pass_raises(model):
    tap = HiddenStatesTap(model, chunk_tokens=8)
    with pytest.raises(RuntimeError, match="before a forward pass"):
        tap.loss(None, torch.zeros((1, 3), dtype=torch.long))
