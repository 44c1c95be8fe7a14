"""The GPU's encoding pipeline, checked on the CPU: token-budget batches, the worker hand-off (order,
completeness, errors), packed (unpadded) BERT against the padded model, the character cut before tokenizing, the
trainer's prefetch and a collection's default batch."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from sbert_qdrant._collection.vectors import CPU_BATCH, GPU_BATCH, default_batch_size
from sbert_qdrant.encoder.feed import TokenFeed
from sbert_qdrant.encoder.packed import pack
from sbert_qdrant.encoder.pipeline import ahead, chunked_batches, encode_pipelined, pipelined, token_budget_batches
from sbert_qdrant.errors import InvalidArgumentError
from sbert_qdrant.testing import tiny_encoder
from sbert_qdrant.training.prefetch import prefetched

CPU = torch.device("cpu")


def _workers() -> int:
    return sum(t.name == "sbert-qdrant-prepare" for t in threading.enumerate())


@pytest.mark.parametrize("seed", range(20))
def test_token_budget_batches_take_every_text_once_within_the_budget(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 300) for _ in range(rng.randint(1, 500))]
    budget, most = rng.choice([64, 512, 4096]), rng.choice([1, 7, 64, 10_000])
    batches = token_budget_batches(lengths, budget, most)
    taken = np.concatenate(batches)
    assert sorted(taken.tolist()) == list(range(len(lengths)))
    assert [lengths[i] for i in taken] == sorted(lengths, reverse=True)  # longest first
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= most and (len(batch) * longest <= budget or len(batch) == 1)


def test_token_budget_batches_refuse_a_bad_budget() -> None:
    with pytest.raises(InvalidArgumentError, match="max_tokens=0"):
        token_budget_batches([3], 0, 4)


def test_chunked_batches_index_every_text_once() -> None:
    lengths = [(i * 37) % 50 + 1 for i in range(1000)]
    spans: list[range] = []

    def lengths_of(span: range) -> list[int]:
        spans.append(span)
        return lengths[span.start : span.stop]

    batches = list(chunked_batches(len(lengths), lengths_of, 200, 16, chunk=300))
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    assert [(s.start, s.stop) for s in spans] == [(0, 300), (300, 600), (600, 900), (900, 1000)]


def test_pipelined_keeps_order_and_completeness_from_a_generator() -> None:
    landed: list[tuple[int, float]] = []

    def items() -> Iterator[int]:
        yield from range(50)

    pipelined(items(), lambda i: torch.full((2,), float(i)), lambda i, rows: landed.append((i, float(rows[0]))), CPU)
    assert landed == [(i, float(i)) for i in range(50)]
    assert _workers() == 0


@pytest.mark.parametrize("where", ["items", "compute", "land"])
def test_pipelined_raises_an_error_from_any_side_and_stops_its_worker(where: str) -> None:
    def items() -> Iterator[int]:
        for i in range(1000):
            if where == "items" and i == 5:
                raise ValueError("boom")
            yield i

    def compute(i: int) -> torch.Tensor:
        if where == "compute" and i == 5:
            raise ValueError("boom")
        return torch.zeros(1)

    def land(i: int, rows: np.ndarray) -> None:
        if where == "land" and i == 5:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pipelined(items(), compute, land, CPU)
    assert _workers() == 0


def test_ahead_stops_its_worker_when_the_reader_leaves_early() -> None:
    with ahead(iter(range(10**9))) as items:
        assert [next(items) for _ in range(3)] == [0, 1, 2]
    assert _workers() == 0


def test_packed_bert_equals_the_padded_model() -> None:
    transformer = tiny_encoder().transformer
    texts = ["a", "hello world", "a much longer sentence with many more words than the others", "x y z " * 5]
    ids, _ = transformer.tokenize(texts)
    with torch.inference_mode():
        padded = transformer(transformer.collate(ids, CPU))["token_embeddings"]
        packed = transformer(pack(ids, pin=False))["token_embeddings"]
    mask = transformer.collate(ids, CPU)["attention_mask"].bool()
    assert packed.shape == padded.shape
    cosine = torch.nn.functional.cosine_similarity(packed[mask], padded[mask], dim=-1)
    assert cosine.min() >= 0.9999
    assert packed[~mask].abs().max() == 0


@pytest.mark.parametrize("packed", [False, True])
def test_the_device_pipeline_encodes_as_encode_does(packed: bool) -> None:
    encoder = tiny_encoder()
    transformer = encoder.transformer
    texts = [f"text number {i} " + "word " * (i % 13) for i in range(300)]
    out = np.zeros((len(texts), encoder.dimension), dtype=np.float32)
    feed = TokenFeed(texts, transformer.tokenize, pack if packed else transformer.collate_host, pin=False)

    def compute(features: dict[str, torch.Tensor]) -> torch.Tensor:
        for module in encoder.pipeline:
            features = module(features)
        return features["sentence_embedding"]

    def land(index: np.ndarray, rows: np.ndarray) -> None:
        out[index] = rows

    encode_pipelined(len(texts), feed.lengths, feed.collate, compute, land, CPU, 256, 32)
    expected = encoder.encode(texts)
    assert (out * expected).sum(axis=1).min() >= 0.9999


def test_long_texts_cut_by_characters_tokenize_as_whole_ones() -> None:
    transformer = tiny_encoder().transformer
    transformer.set_max_seq_length(16)
    words = ["Lorem", "ipsum,", "dolor", "sit", "amet;", "consectetur.", "Über", "café", "naïve", "東京", "xyzzyplugh"]
    rng = random.Random(0)
    texts = []
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 150)))
        texts.append(" " * rng.randint(0, 400) + text if rng.random() < 0.3 else text)
    ids, cut = transformer.tokenize(texts)
    plain = transformer.tokenizer(texts, truncation=True, max_length=16, return_attention_mask=False)["input_ids"]
    assert ids == plain
    assert cut == sum(len(transformer.tokenizer(t)["input_ids"]) > 16 for t in texts)


def test_prefetched_batches_come_in_step_order() -> None:
    made: list[int] = []

    def make(step: int) -> tuple[int, int]:  # type: ignore[misc]
        made.append(step)
        return step, step * step

    with prefetched(make, range(3, 40), CPU) as batches:  # type: ignore[arg-type]
        assert list(batches) == [(s, s * s) for s in range(3, 40)]
    assert made == list(range(3, 40))


def test_prefetched_raises_an_error_of_the_worker() -> None:
    def make(step: int) -> tuple[int, int]:  # type: ignore[misc]
        if step == 4:
            raise RuntimeError("bad batch")
        return step, step

    with pytest.raises(RuntimeError, match="bad batch"), prefetched(make, range(10), CPU) as batches:  # type: ignore[arg-type]
        list(batches)


class _OnDevice:
    def __init__(self, device: str) -> None:
        self.device = torch.device(device)


def test_a_collection_picks_a_large_batch_for_a_gpu_encoder() -> None:
    assert default_batch_size(_OnDevice("cuda:0")) == GPU_BATCH
    assert default_batch_size(_OnDevice("cpu")) == CPU_BATCH
    assert default_batch_size(object()) == CPU_BATCH
