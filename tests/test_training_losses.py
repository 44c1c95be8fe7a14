"""Each objective on the tiny model: a scalar loss, gradients reach the encoder, a few steps lower the loss."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import tiny_transformer

from sbert_qdrant import (
    AttentionPooling,
    Dense,
    InvalidArgumentError,
    InvalidInputError,
    Normalize,
    SentenceEncoder,
    WeightedLayerPooling,
)
from sbert_qdrant.training import (
    CoSENTLoss,
    CosineSimilarityLoss,
    Example,
    MultipleNegativesRankingLoss,
    Objective,
    OnlineContrastiveLoss,
    SoftmaxLoss,
    Trainer,
    TrainingConfig,
    TripletLoss,
    make_batch,
    read_binary_pairs,
    read_nli,
    read_texts,
)

DATA = Path(__file__).parent / "data"
NLI = read_nli(DATA / "nli_train_sample.tsv")[:16]
TRIPLETS = read_texts(DATA / "nli_triplets_sample.tsv")[:16]
QUORA = read_binary_pairs(DATA / "quora_train_sample.jsonl")[:16]
# Scored pairs: a premise with its own entailed hypothesis (1.0) or with another premise's contradiction (0.0).
SCORED = [Example((t.texts[0], t.texts[1]), 1.0) for t in TRIPLETS[:8]] + [
    Example((t.texts[0], TRIPLETS[(i + 3) % 16].texts[2]), 0.0) for i, t in enumerate(TRIPLETS[8:])
]

CASES: list[tuple[str, type[Objective], dict, list[Example]]] = [
    ("softmax", SoftmaxLoss, {}, NLI),
    ("softmax-product", SoftmaxLoss, {"concat_product": True}, NLI),
    ("cosine", CosineSimilarityLoss, {}, SCORED),
    ("cosent", CoSENTLoss, {}, SCORED),
    ("triplet-euclid", TripletLoss, {}, TRIPLETS),
    ("triplet-cosine", TripletLoss, {"distance": "cosine", "margin": 0.3}, TRIPLETS),
    ("triplet-manhattan", TripletLoss, {"distance": "manhattan", "margin": 3.0}, TRIPLETS),
    ("mnrl", MultipleNegativesRankingLoss, {}, [Example(t.texts[:2]) for t in TRIPLETS]),
    ("mnrl-hard-negatives", MultipleNegativesRankingLoss, {}, TRIPLETS),
    ("mnrl-symmetric", MultipleNegativesRankingLoss, {"symmetric": True}, [Example(t.texts[:2]) for t in TRIPLETS]),
    ("contrastive", OnlineContrastiveLoss, {}, QUORA),
]


def eval_loss(objective: Objective, examples: list[Example]) -> float:
    objective.eval()
    with torch.no_grad():
        return float(objective(make_batch(objective, examples)))


@pytest.mark.parametrize(("name", "cls", "options", "examples"), CASES, ids=[c[0] for c in CASES])
def test_loss_is_a_scalar_with_gradients_and_training_lowers_it(
    tiny_encoder: SentenceEncoder, name: str, cls: type[Objective], options: dict, examples: list[Example]
) -> None:
    objective = cls(tiny_encoder, **options)
    objective.train()
    loss = objective(make_batch(objective, examples))
    assert loss.shape == () and torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in tiny_encoder.transformer.model.encoder.parameters()]
    assert all(g is not None for g in grads) and any(float(g.abs().sum()) > 0 for g in grads if g is not None)
    objective.zero_grad()

    before = eval_loss(objective, examples)
    config = TrainingConfig(max_steps=12, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0, precision="fp32")
    Trainer(tiny_encoder, [(objective, examples)], config).fit()
    assert eval_loss(objective, examples) < before


def test_trainable_pooling_and_dense_train_with_the_transformer() -> None:
    transformer = tiny_transformer()
    dim = transformer.dimension
    layers = WeightedLayerPooling(dim, transformer.num_layers)
    attention, dense = AttentionPooling(dim), Dense(dim, 8, activation="tanh")
    encoder = SentenceEncoder([transformer, layers, attention, dense, Normalize()], device="cpu")
    start = [p.detach().clone() for p in (layers.layer_logits, attention.query, dense.linear.weight)]
    config = TrainingConfig(max_steps=3, batch_size=16, learning_rate=1e-3, warmup_ratio=0.0, precision="fp32")
    Trainer(encoder, [(SoftmaxLoss(encoder), NLI)], config).fit()
    for old, new in zip(start, (layers.layer_logits, attention.query, dense.linear.weight), strict=True):
        assert not torch.equal(old, new.detach())


def test_softmax_trains_and_predicts_on_the_uncut_vectors_of_a_cut_encoder(tiny_encoder: SentenceEncoder) -> None:
    """Training runs the model whole: a ``truncate_dim`` cut is for the vectors ``encode`` returns, not the head's."""
    tiny_encoder.truncate_dim = 8
    loss = SoftmaxLoss(tiny_encoder)
    config = TrainingConfig(max_steps=1, batch_size=8, learning_rate=1e-3, precision="fp32")
    Trainer(tiny_encoder, [(loss, NLI)], config).fit()
    assert loss.predict_proba(["a cat"], ["a dog"]).shape == (1, len(loss.labels))
    assert tiny_encoder.encode(["a cat"]).shape == (1, 8)


def test_softmax_head_round_trip_and_predictions(tiny_encoder: SentenceEncoder, tmp_path: Path) -> None:
    loss = SoftmaxLoss(tiny_encoder, concat_product=True)
    config = TrainingConfig(max_steps=2, batch_size=8, learning_rate=1e-3, precision="fp32")
    Trainer(tiny_encoder, [(loss, NLI)], config, output_dir=tmp_path / "model").fit()
    assert (tmp_path / "model" / "softmax_head" / "model.safetensors").is_file()

    encoder = SentenceEncoder.load(tmp_path / "model", device="cpu", precision="fp32")
    again = SoftmaxLoss.load_head(encoder, tmp_path / "model")
    assert again.labels == loss.labels and again.concat_product
    left, right = [e.texts[0] for e in NLI], [e.texts[1] for e in NLI]
    torch.testing.assert_close(
        torch.from_numpy(again.predict_proba(left, right)), torch.from_numpy(loss.predict_proba(left, right))
    )
    assert set(again.predict(left, right)) <= {"contradiction", "entailment", "neutral"}

    # Continue training from the re-loaded head.
    Trainer(encoder, [(again, NLI)], config).fit()


def test_objectives_refuse_examples_they_cannot_use(tiny_encoder: SentenceEncoder) -> None:
    with pytest.raises(InvalidInputError, match=r"examples\[0\] has 2 texts; TripletLoss needs 3"):
        TripletLoss(tiny_encoder).check_examples(NLI)
    with pytest.raises(InvalidInputError, match=r"needs a score label"):
        CosineSimilarityLoss(tiny_encoder).check_examples([Example(("a", "b"))])
    with pytest.raises(InvalidInputError, match=r"class index in 0..2"):
        SoftmaxLoss(tiny_encoder).check_examples([Example(("a", "b"), 5)])
    with pytest.raises(InvalidArgumentError, match=r"distance='dot'"):
        TripletLoss(tiny_encoder, distance="dot")  # type: ignore[arg-type]
    with pytest.raises(
        InvalidArgumentError, match=r"distance='euclidean' is no longer accepted; pass distance='euclid'"
    ):
        TripletLoss(tiny_encoder, distance="euclidean")  # type: ignore[arg-type]
    assert TripletLoss(tiny_encoder).distance == "euclid"  # Qdrant's name, as the store uses
