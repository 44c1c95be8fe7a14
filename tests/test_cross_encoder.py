"""CrossEncoder: the folder format both ways against sentence-transformers, predict/rank order and batching, new
cross-encoders from a transformer, precisions, evaluators, and bad inputs refused before any work."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_transformer
from scipy.stats import spearmanr
from sentence_transformers import CrossEncoder as ReferenceCrossEncoder
from transformers import BertForSequenceClassification

from sbert_qdrant import (
    CrossEncoder,
    InvalidArgumentError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    RankedText,
    SentenceEncoder,
)
from sbert_qdrant.encoder.cross_scoring import cpu_batch_rows
from sbert_qdrant.encoder.int8.calibration import int8_isa
from sbert_qdrant.training import PairClassificationEvaluator, RetrievalEvaluator, STSEvaluator

PAIRS = [
    ("A man is playing a guitar.", "A man plays an instrument."),
    ("Two dogs run on the beach.", "A cat sleeps on the sofa."),
    ("How do I learn Python quickly?", "What is the fastest way to learn Python?"),
    ("The stock market fell sharply today.", "Shares dropped a lot on Monday."),
    # over the tiny model's 32 tokens: truncated, longest text first
    ("word " * 40, "another rather long sentence that keeps going " * 3),
    ("", "an empty first text"),
]


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random sentence-transformers encoder folder: the transformer new cross-encoders start from."""
    from sbert_qdrant.testing import tiny_encoder

    folder = tmp_path_factory.mktemp("encoder")
    tiny_encoder().save(folder)
    return folder


def sharpened(cross_encoder: CrossEncoder) -> CrossEncoder:
    """Scale the fresh head up: a random tiny BERT gives near-constant logits, too alike to tell orderings apart."""
    with torch.no_grad():
        cross_encoder.transformer.model.classifier.weight.mul_(1000)
    return cross_encoder


@pytest.fixture
def cross_encoder(encoder_folder: Path) -> CrossEncoder:
    return sharpened(CrossEncoder.from_transformer(encoder_folder, device="cpu", seed=1))


def classifier_folder(folder: Path, num_labels: int = 1, activation: str | None = None) -> Path:
    """A plain Hugging Face classification checkpoint (as sentence-transformers < 6 saved cross-encoders)."""
    transformer = tiny_transformer(seed=3)
    config = transformer.model.config
    config.num_labels = num_labels
    if activation is not None:
        config.sentence_transformers = {"activation_fn": activation}
    torch.manual_seed(3)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.mul_(1000)  # see sharpened
    model.save_pretrained(str(folder))
    transformer.tokenizer.save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize("num_labels", [1, 3])
def test_saved_folder_scores_the_same_in_sentence_transformers(
    encoder_folder: Path, tmp_path: Path, num_labels: int
) -> None:
    ours = sharpened(CrossEncoder.from_transformer(encoder_folder, num_labels=num_labels, device="cpu", seed=2))
    ours.save(tmp_path / "ce")
    assert not list((tmp_path / "ce").glob("*.bin")) and (tmp_path / "ce" / "model.safetensors").is_file()
    theirs = ReferenceCrossEncoder(str(tmp_path / "ce"), device="cpu")
    assert theirs.max_seq_length == ours.max_seq_length == 32 and theirs.num_labels == num_labels
    np.testing.assert_allclose(theirs.predict(PAIRS), ours.predict(PAIRS), atol=1e-5)  # default activations
    raw = theirs.predict(PAIRS, activation_fn=torch.nn.Identity())
    np.testing.assert_allclose(raw, ours.predict(PAIRS, activation="identity"), atol=1e-4)
    assert float(np.ptp(raw)) > 0.05  # the scores differ, so the comparison means something


def test_sentence_transformers_folder_scores_the_same_here(tmp_path: Path) -> None:
    theirs = ReferenceCrossEncoder(
        str(classifier_folder(tmp_path / "hf")), device="cpu", max_length=24, activation_fn=torch.nn.Identity()
    )
    theirs.save(str(tmp_path / "st"))
    ours = CrossEncoder.load(tmp_path / "st", device="cpu", precision="fp32")
    assert (ours.max_seq_length, ours.activation, ours.num_labels) == (24, "identity", 1)
    np.testing.assert_allclose(ours.predict(PAIRS), theirs.predict(PAIRS), atol=1e-5)
    ours.save(tmp_path / "again")  # and back: what it read is what it writes
    again = ReferenceCrossEncoder(str(tmp_path / "again"), device="cpu")
    assert isinstance(again.activation_fn, torch.nn.Identity) and again.max_seq_length == 24
    np.testing.assert_allclose(again.predict(PAIRS), theirs.predict(PAIRS), atol=1e-5)


def test_older_folders_a_bare_classification_checkpoint(tmp_path: Path) -> None:
    legacy = classifier_folder(tmp_path / "v4", activation="torch.nn.modules.linear.Identity")
    ours = CrossEncoder.load(legacy, device="cpu", precision="fp32")
    theirs = ReferenceCrossEncoder(str(legacy), device="cpu")
    assert ours.activation == "identity" and isinstance(theirs.activation_fn, torch.nn.Identity)
    np.testing.assert_allclose(ours.predict(PAIRS), theirs.predict(PAIRS), atol=1e-5)
    three = CrossEncoder.load(classifier_folder(tmp_path / "three", num_labels=3), device="cpu", precision="fp32")
    assert three.activation == "identity" and three.predict(PAIRS).shape == (len(PAIRS), 3)


def test_from_transformer_keeps_the_body_and_seeds_the_head(encoder_folder: Path, tmp_path: Path) -> None:
    first = CrossEncoder.from_transformer(encoder_folder, device="cpu", seed=1)
    body = SentenceEncoder.load(encoder_folder, device="cpu", precision="fp32").transformer.model.state_dict()
    assert all(torch.equal(tensor, first.transformer.model.bert.state_dict()[name]) for name, tensor in body.items())
    same = CrossEncoder.from_transformer(encoder_folder, device="cpu", seed=1)
    other = CrossEncoder.from_transformer(encoder_folder, device="cpu", seed=2)
    assert same_weights(same, first) and not same_weights(other, same)
    np.testing.assert_allclose(same.predict(PAIRS), first.predict(PAIRS), atol=1e-6)
    assert not np.allclose(other.predict(PAIRS, activation="identity"), same.predict(PAIRS, activation="identity"))
    sharpened(first).save(tmp_path / "ce")  # a cross-encoder folder is a transformer too: its head is replaced
    restarted = CrossEncoder.from_transformer(tmp_path / "ce", device="cpu", seed=2)
    assert same_weights(restarted, other)
    np.testing.assert_allclose(restarted.predict(PAIRS), other.predict(PAIRS), atol=1e-6)


def same_weights(a: CrossEncoder, b: CrossEncoder) -> bool:
    """Bit-identical parameters (the claim of a seed; scores computed from them may round per CPU)."""
    ours, theirs = a.transformer.model.state_dict(), b.transformer.model.state_dict()
    return ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)


@pytest.mark.slow
def test_from_transformer_on_the_default_model(default_encoder: SentenceEncoder) -> None:
    cross_encoder = CrossEncoder.from_transformer(device="cpu")
    assert cross_encoder.max_seq_length == default_encoder.max_seq_length == 256
    word_embeddings = cross_encoder.transformer.model.bert.embeddings.word_embeddings.weight
    assert torch.equal(word_embeddings, default_encoder.transformer.model.embeddings.word_embeddings.weight)
    assert cross_encoder.predict(PAIRS[:2]).shape == (2,)


def test_predict_keeps_input_order_whatever_the_batching(cross_encoder: CrossEncoder) -> None:
    scores = cross_encoder.predict(PAIRS, activation="identity")
    assert scores.dtype == np.float32 and scores.shape == (len(PAIRS),)
    for batch_size in (1, 2, 64):
        np.testing.assert_allclose(cross_encoder.predict(PAIRS, batch_size, "identity"), scores, atol=1e-5)
    np.testing.assert_allclose(cross_encoder.predict(PAIRS[::-1], activation="identity"), scores[::-1], atol=1e-5)
    one = [float(cross_encoder.predict([pair], activation="identity")[0]) for pair in PAIRS]
    np.testing.assert_allclose(one, scores, atol=1e-5)
    np.testing.assert_allclose(cross_encoder.predict(PAIRS), 1 / (1 + np.exp(-scores)), atol=1e-6)
    assert cross_encoder.predict([]).shape == (0,)
    tensor = cross_encoder.predict(PAIRS, convert_to="torch")
    assert isinstance(tensor, torch.Tensor) and tensor.shape == (len(PAIRS),)


def test_several_labels_and_activations(encoder_folder: Path) -> None:
    three = CrossEncoder.from_transformer(encoder_folder, num_labels=3, device="cpu")
    logits = three.predict(PAIRS)
    assert three.activation == "identity" and logits.shape == (len(PAIRS), 3)
    probabilities = three.predict(PAIRS, activation="softmax")
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(three.predict(PAIRS, activation="tanh"), np.tanh(logits), atol=1e-6)
    with pytest.raises(InvalidArgumentError, match=r"rank needs a score model \(num_labels=1\), not 3"):
        three.rank("q", ["a"])


def test_rank_best_first(cross_encoder: CrossEncoder) -> None:
    query, texts = PAIRS[0][0], [b for _, b in PAIRS]
    scores = cross_encoder.predict([(query, t) for t in texts])
    logits = cross_encoder.predict([(query, t) for t in texts], activation="identity")
    # A clear order: logits at least 1e-5 apart, far more than a batch row's rounding moves them on any CPU.
    assert float(np.diff(np.sort(logits)).min()) > 1e-5
    ranked = cross_encoder.rank(query, texts)
    assert [r.index for r in ranked] == np.argsort(-scores, kind="stable").tolist()
    assert [r.text for r in ranked] == [texts[r.index] for r in ranked]
    np.testing.assert_allclose([r.score for r in ranked], np.sort(scores)[::-1], rtol=1e-5)
    best = ranked[0].index
    assert ranked[0] == RankedText(best, pytest.approx(float(scores.max()), rel=1e-5), texts[best])
    top = cross_encoder.rank(query, texts, top_k=2)
    assert [r.index for r in top] == [r.index for r in ranked[:2]]
    assert [r.index for r in cross_encoder.rank(query, ["same", "same", "same"])] == [0, 1, 2]  # ties: input order
    assert cross_encoder.rank(query, []) == []


def test_rank_scores_each_distinct_text_once(cross_encoder: CrossEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    scored: list[list[tuple[str, str]]] = []
    predict = cross_encoder.predict

    def counting(pairs: list[tuple[str, str]], *args: object, **kwargs: object) -> object:
        scored.append(list(pairs))
        return predict(pairs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cross_encoder, "predict", counting)
    texts = ["b", "a", "b", "c", "a", "b"]
    ranked = cross_encoder.rank("q", texts, batch_size=2)
    assert scored == [[("q", "b"), ("q", "a"), ("q", "c")]]  # one pass per distinct text
    score = {r.index: r.score for r in ranked}
    assert score[0] == score[2] == score[5] and score[1] == score[4]  # identical texts share one score, exactly
    order = [r.index for r in ranked]
    for same_text in ([0, 2, 5], [1, 4]):  # and keep their input order
        assert [i for i in order if i in same_text] == same_text
    assert sorted(order) == list(range(len(texts))) and [r.text for r in ranked] == [texts[i] for i in order]


def test_truncation_is_counted_and_warned(cross_encoder: CrossEncoder, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sbert_qdrant.encoder.cross_encoder"):
        cross_encoder.predict(PAIRS)
        cross_encoder.predict(PAIRS[:4])
    assert cross_encoder.truncated_count == 1 and len(caplog.records) == 1
    assert "1 of 6 pairs were longer than max_seq_length=32" in caplog.text
    ids, types, cut = cross_encoder.pair_token_ids([PAIRS[4]])
    assert cut == 1 and len(ids[0]) == 32 and types is not None and types[0][0] == 0 and types[0][-1] == 1
    tokenizer = cross_encoder.transformer.tokenizer
    whole = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS])["input_ids"]
    cut_here = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], truncation="longest_first", max_length=32)
    assert cross_encoder.pair_token_ids(PAIRS) == (cut_here["input_ids"], cut_here["token_type_ids"], 1)
    assert sum(len(row) > 32 for row in whole) == 1
    cross_encoder.max_seq_length = 64
    cross_encoder.predict(PAIRS)
    assert cross_encoder.truncated_count == 1


def test_bf16_and_int8_track_fp32(cross_encoder: CrossEncoder, tmp_path: Path) -> None:
    cross_encoder.save(tmp_path / "ce")
    full = cross_encoder.predict(PAIRS, activation="identity")
    for precision in ("bf16", "int8"):
        reduced = CrossEncoder.load(tmp_path / "ce", device="cpu", precision=precision)
        np.testing.assert_allclose(reduced.predict(PAIRS, activation="identity"), full, rtol=0.02)
    with pytest.raises(InvalidArgumentError, match="int8-quantized cross-encoder cannot be saved"):
        reduced.save(tmp_path / "int8")
    with pytest.raises(InvalidArgumentError, match="fp16"):
        CrossEncoder.load(tmp_path / "ce", device="cpu", precision="fp16")


def test_scoring_runs_the_last_layer_for_the_first_token_alone(cross_encoder: CrossEncoder, tmp_path: Path) -> None:
    """BERT's head reads the first token alone, so predict runs the last layer's attention output and FFN for that
    token only, with the logits of the whole model, in fp32 and static int8; training forwards keep every token."""
    cross_encoder.save(tmp_path / "ce")
    int8 = CrossEncoder.load(tmp_path / "ce", device="cpu", precision="int8", calibration_pairs=PAIRS * 20)
    assert int8.int8_mode == "static" or int8_isa() is None
    widths: list[int] = []
    for model in (cross_encoder, int8):
        widths.clear()
        last = model.transformer.model.bert.encoder.layer[-1]
        handle = last.intermediate.register_forward_hook(lambda _m, _a, out: widths.append(out.shape[1]))
        try:
            scores = model.predict(PAIRS, activation="identity")
            assert widths and set(widths) == {1}
            widths.clear()
            with torch.inference_mode():
                every_token = model(model.tokenize(PAIRS))[:, 0].numpy()
            assert widths and min(widths) > 1
        finally:
            handle.remove()
        np.testing.assert_allclose(scores, every_token, atol=1e-4)


def test_cpu_batches_feed_every_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert [cpu_batch_rows(n, 32) for n in (1, 3, 20, 50, 1000)] == [1, 1, 5, 13, 32]
    assert cpu_batch_rows(20, 4) == 4
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert cpu_batch_rows(20, 32) == 32


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (None, r"pairs must be a sequence of \(text_a, text_b\), not NoneType"),
        ("a text", r"not str"),
        (["a", "b"], r"pairs\[0\] is str \('a'\), not a pair"),
        ([("a", "b"), ("c",)], r"pairs\[1\] is tuple .*not a pair"),
        ([("a", "b"), ("c", "d", "e")], r"pairs\[1\] is tuple"),
        ([("a", "b"), ("c", None)], r"pairs\[1\]\[1\] is NoneType \(None\), not str"),
        ([("a", "b"), ["c", "d"], (3, "e")], r"pairs\[2\]\[0\] is int \(3\), not str"),
    ],
)
def test_bad_pairs_are_refused_naming_the_index(cross_encoder: CrossEncoder, pairs: object, message: str) -> None:
    calls: list[object] = []
    cross_encoder.pair_token_ids = lambda *args: calls.append(args)  # type: ignore[method-assign,assignment,return-value]
    with pytest.raises(InvalidInputError, match=message):
        cross_encoder.predict(pairs)  # type: ignore[arg-type]
    assert calls == []  # refused before any tokenizing


def test_bad_arguments(cross_encoder: CrossEncoder) -> None:
    for call, message in [
        (lambda: cross_encoder.predict(PAIRS, batch_size=0), r"batch_size=0 must be a positive integer"),
        (lambda: cross_encoder.predict(PAIRS, activation="relu"), r"activation='relu' is not one of"),  # type: ignore[arg-type]
        (lambda: cross_encoder.predict(PAIRS, convert_to="list"), r"convert_to='list'"),  # type: ignore[arg-type]
        (lambda: cross_encoder.rank("q", ["a"], top_k=0), r"top_k=0 must be a positive integer"),
        (lambda: CrossEncoder.from_transformer(num_labels=0), r"num_labels=0 must be a positive integer"),
        (lambda: CrossEncoder.load(None), r"no cross-encoder ships with sbert-qdrant"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            call()
    with pytest.raises(InvalidInputError, match=r"query is NoneType"):
        cross_encoder.rank(None, ["a"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"texts\[1\] is NoneType"):
        cross_encoder.rank("q", ["a", None])  # type: ignore[list-item]


def test_folders_that_are_not_cross_encoders_are_refused(encoder_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"holds a SentenceTransformer .*CrossEncoder.from_transformer"):
        CrossEncoder.load(encoder_folder)
    bare = tmp_path / "bare"
    tiny_transformer().model.save_pretrained(str(bare))
    with pytest.raises(ModelLoadError, match=r"no sequence-classification model .*from_transformer"):
        CrossEncoder.load(bare)
    with pytest.raises(ModelNotFoundError, match=r"Tried"):
        CrossEncoder.load(tmp_path / "missing")
    pickled = classifier_folder(tmp_path / "pickled")
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match=r"only pickle weights \['pytorch_model.bin'\]; .*safetensors only"):
        CrossEncoder.load(pickled)


def test_pair_evaluators_score_with_predict(
    cross_encoder: CrossEncoder, stsb_sample: tuple[list[str], list[str], list[float]]
) -> None:
    left, right, gold = (x[:40] for x in stsb_sample)
    scores = cross_encoder.predict(list(zip(left, right, strict=True)))
    metrics = STSEvaluator(left, right, gold)(cross_encoder)
    assert metrics["spearman"] == pytest.approx(100 * spearmanr(scores, gold).statistic, abs=1e-4)
    labels = [int(g >= 2.5) for g in gold]
    pairs = PairClassificationEvaluator(left, right, labels)(cross_encoder)
    assert 0 <= pairs["ap"] <= 100 and 0 <= pairs["f1_threshold"] <= 1  # thresholds on the sigmoid scores
    with pytest.raises(InvalidArgumentError, match="a cross-encoder cannot search a corpus on its own"):
        RetrievalEvaluator({"q": "a"}, {"d": "a"}, {"q": ["d"]})(cross_encoder)
