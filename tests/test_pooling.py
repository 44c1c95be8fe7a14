"""Pooling modes against hand-computed values, trainable poolings' starting points and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from sbert_qdrant import AttentionPooling, InvalidArgumentError, ModelLoadError, Pooling, WeightedLayerPooling

# Two texts, three positions, two dims; the second text has one padding position.
TOKENS = torch.tensor(
    [
        [[1.0, 2.0], [3.0, -4.0], [5.0, 0.0]],
        [[2.0, 2.0], [4.0, 6.0], [100.0, 100.0]],
    ]
)
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


def pool(modes: str | list[str]) -> torch.Tensor:
    features = {"token_embeddings": TOKENS.clone(), "attention_mask": MASK.clone()}
    return Pooling(2, modes)(features)["sentence_embedding"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("mean", [[3.0, -2 / 3], [3.0, 4.0]]),
        ("max", [[5.0, 2.0], [4.0, 6.0]]),
        ("cls", [[1.0, 2.0], [2.0, 2.0]]),
        ("mean_sqrt_len", [[9 / math.sqrt(3), -2 / math.sqrt(3)], [6 / math.sqrt(2), 8 / math.sqrt(2)]]),
        # positions weighted 1, 2, 3: (1*1 + 2*3 + 3*5) / 6 = 22/6; second text (2 + 8) / 3, (2 + 12) / 3
        ("weighted_mean", [[22 / 6, (2 - 8) / 6], [10 / 3, 14 / 3]]),
        ("last_token", [[5.0, 0.0], [4.0, 6.0]]),
    ],
)
def test_pooling_mode_matches_hand_computed_values(mode: str, expected: list[list[float]]) -> None:
    torch.testing.assert_close(pool(mode), torch.tensor(expected))


def test_combined_modes_concatenate_in_given_order() -> None:
    combined = pool(["mean", "max"])
    assert combined.shape == (2, 4)
    torch.testing.assert_close(combined, torch.cat([pool("mean"), pool("max")], dim=1))
    assert Pooling(2, ["mean", "max"]).output_dimension == 4


def test_half_precision_tokens_pool_in_float32() -> None:
    features = {"token_embeddings": TOKENS.to(torch.bfloat16), "attention_mask": MASK}
    out = Pooling(2, "mean")(features)["sentence_embedding"]
    assert out.dtype == torch.float32


@pytest.mark.parametrize("modes", ["median", [], ["mean", "mean"]])
def test_invalid_modes_are_refused(modes: object) -> None:
    with pytest.raises(InvalidArgumentError, match="pooling modes"):
        Pooling(2, modes)  # type: ignore[arg-type]


def test_config_round_trip_keeps_modes_and_order() -> None:
    for modes in (["mean"], ["cls", "max", "mean"], ["max", "cls"]):
        original = Pooling(8, modes)
        assert Pooling.from_config(original.config()).modes == tuple(modes)
    # canonical order is written with the legacy keys every sentence-transformers release reads
    assert Pooling(8, ["cls", "mean"]).config()["pooling_mode_mean_tokens"] is True
    assert Pooling(8, ["max", "cls"]).config()["pooling_mode"] == ["max", "cls"]


def test_unknown_mode_in_saved_config_is_a_load_error() -> None:
    with pytest.raises(ModelLoadError, match="bogus"):
        Pooling.from_config({"embedding_dimension": 4, "pooling_mode": "bogus"})


def test_attention_pooling_starts_as_mean_pooling_and_learns() -> None:
    attention = AttentionPooling(2)
    features = {"token_embeddings": TOKENS.clone(), "attention_mask": MASK.clone()}
    out = attention(features)["sentence_embedding"]
    torch.testing.assert_close(out, pool("mean"))
    out.sum().backward()
    assert attention.query.grad is not None and attention.query.grad.abs().sum() > 0


def test_attention_pooling_ignores_padding() -> None:
    attention = AttentionPooling(2)
    with torch.no_grad():
        attention.query.copy_(torch.tensor([1.0, 1.0]))
    features = {"token_embeddings": TOKENS.clone(), "attention_mask": MASK.clone()}
    second = attention(features)["sentence_embedding"][1]
    # softmax over the two real tokens only (scores 4/sqrt2 and 10/sqrt2); the 100s are padding
    w = torch.softmax(torch.tensor([4.0, 10.0]) / math.sqrt(2), dim=0)
    torch.testing.assert_close(second, w[0] * TOKENS[1, 0] + w[1] * TOKENS[1, 1])


def test_weighted_layer_pooling_starts_as_layer_average_and_learns() -> None:
    layers = tuple(torch.full((2, 3, 2), float(i)) for i in range(4))  # embeddings + 3 layers
    pooling = WeightedLayerPooling(2, num_layers=3, layer_start=1)
    out = pooling({"all_layer_embeddings": layers, "attention_mask": MASK})["token_embeddings"]
    torch.testing.assert_close(out, torch.full((2, 3, 2), 2.0))  # mean of 1, 2, 3
    out.sum().backward()
    assert pooling.layer_logits.grad is not None


def test_weighted_layer_pooling_rejects_wrong_layer_count() -> None:
    layers = tuple(torch.zeros(1, 2, 2) for _ in range(3))
    with pytest.raises(InvalidArgumentError, match="num_layers=5"):
        WeightedLayerPooling(2, num_layers=5)({"all_layer_embeddings": layers})
    with pytest.raises(InvalidArgumentError, match="layer_start"):
        WeightedLayerPooling(2, num_layers=2, layer_start=3)
