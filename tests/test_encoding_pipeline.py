"""The GPU's encoding pipeline, checked on the CPU: token-budget batches, growing chunks tokenized once on several
threads, the worker hand-off (order, completeness, errors), packed (unpadded) BERT against the padded model and its
fall-back to padded, the character cut before tokenizing, no device syncs in a forward or a training step, the
trainer's prefetch and the default GPU batch (the token budget alone)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import numpy as np
import pytest
import torch

import sbert_qdrant.encoder.encoder as encoder_module
from sbert_qdrant._collection.vectors import CPU_BATCH, GPU_BATCH, default_batch_size
from sbert_qdrant.encoder.batching import (
    Chunk,
    ahead,
    batch_cap,
    chunk_spans,
    encode_pipelined,
    pipelined,
    token_budget_batches,
)
from sbert_qdrant.encoder.feed import TokenFeed
from sbert_qdrant.encoder.packed import pack, packed_or_padded
from sbert_qdrant.encoder.tokens import TokenRows
from sbert_qdrant.errors import InvalidArgumentError
from sbert_qdrant.testing import DeviceSyncCounter, tiny_encoder
from sbert_qdrant.training import Example, SoftmaxLoss, Trainer, TrainingConfig
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


def test_token_budget_batches_without_a_count_cap_fill_the_budget() -> None:
    batches = token_budget_batches([16] * 5000, 32_768, None)
    assert [len(b) for b in batches] == [2048, 2048, 904]


def test_chunks_start_small_and_grow_to_the_largest() -> None:
    spans = chunk_spans(5000, first=100, most=1000)
    assert [(s.start, s.stop) for s in spans] == [
        (0, 100), (100, 300), (300, 700), (700, 1500), (1500, 2500), (2500, 3500), (3500, 4500), (4500, 5000)
    ]  # fmt: skip
    assert chunk_spans(0) == []


@pytest.mark.parametrize("threads", [1, 3])
def test_a_feed_tokenizes_each_text_once_in_order_on_its_threads(threads: int) -> None:
    transformer = tiny_encoder().transformer
    texts = [f"text {i} " + "word " * (i % 40) for i in range(3000)]
    calls: list[int] = []

    def tokenize(part: list[str]) -> tuple[TokenRows, int]:
        calls.append(len(part))
        return transformer.token_rows(part)

    feed = TokenFeed(texts, tokenize, lambda rows: rows.lengths, transformer.collate_rows, pin=False, threads=threads)
    chunks = list(feed.chunks())
    assert sorted(calls) == sorted(len(s) for s in chunk_spans(len(texts))) and sum(calls) == len(texts)
    assert [c.start for c in chunks] == [s.start for s in chunk_spans(len(texts))]
    expected, cut = transformer.tokenize(texts)
    assert [row for c in chunks for row in c.tokens.tolist()] == expected
    assert feed.truncated == cut > 0  # the tiny model's 32 tokens cut the longer texts
    features = feed.collate(chunks[1], np.array([3, 0]))
    assert features["input_ids"][1, : len(expected[256])].tolist() == expected[256]


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
    rows, _ = transformer.token_rows(texts)
    with torch.inference_mode():
        padded = transformer(transformer.collate(ids, CPU))["token_embeddings"]
        packed = transformer(pack(rows, np.arange(len(texts)), pin=False))["token_embeddings"]
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
    collate = pack if packed else transformer.collate_rows
    feed = TokenFeed(texts, transformer.token_rows, lambda rows: rows.lengths, collate, pin=False, threads=2)

    def compute(features: dict[str, torch.Tensor]) -> torch.Tensor:
        for module in encoder.module_list:
            features = module(features)
        return features["sentence_embedding"]

    def land(chunk: Chunk, index: np.ndarray, rows: np.ndarray) -> None:
        out[chunk.start + index] = rows

    encode_pipelined(feed.chunks(), feed.collate, compute, land, CPU, 256, 32)
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


class _Budgeted(_OnDevice):
    batch_tokens = 32_768


def test_a_collection_picks_a_large_batch_for_a_gpu_encoder() -> None:
    assert default_batch_size(_OnDevice("cuda:0")) == GPU_BATCH
    assert default_batch_size(_Budgeted("cuda:0")) == 16_384  # the token budget alone: 2 tokens a text at least
    assert default_batch_size(_Budgeted("cpu")) == CPU_BATCH
    assert default_batch_size(_OnDevice("cpu")) == CPU_BATCH
    assert default_batch_size(object()) == CPU_BATCH


def test_the_default_batch_is_32_on_a_cpu_and_the_token_budget_alone_on_a_gpu() -> None:
    assert batch_cap(None, CPU) == 32 and batch_cap(None, torch.device("cuda")) is None
    assert batch_cap(64, torch.device("cuda")) == 64
    with pytest.raises(InvalidArgumentError, match="batch_size=0"):
        batch_cap(0, CPU)


def test_encode_on_an_accelerator_cuts_batches_by_the_token_budget_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = tiny_encoder()
    seen: list[tuple[int, int | None]] = []
    sizes: list[int] = []

    def record(chunks, collate, compute, land, device, max_tokens, max_texts):  # type: ignore[no-untyped-def]
        seen.append((max_tokens, max_texts))
        for chunk in chunks:  # the batches the pipeline would cut
            sizes.extend(len(index) for index in token_budget_batches(chunk.lengths, max_tokens, max_texts))

    monkeypatch.setattr(encoder_module, "encode_pipelined", record)
    encoder.device = torch.device("cuda")  # the accelerator branch, driven on the CPU (nothing reaches a device)
    texts = [f"a short text {i}" for i in range(5000)]
    encoder.encode(texts)
    encoder.encode(texts, batch_size=64)
    assert seen == [(encoder.batch_tokens, None), (encoder.batch_tokens, 64)]
    assert max(sizes) > 1000  # the default: thousands of short texts per batch, not 32


def test_a_packed_batch_that_fails_runs_padded_and_the_encoder_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    encoder = tiny_encoder()
    transformer = encoder.transformer
    texts = ["a", "hello world", "a much longer sentence with many more words than the others"]
    rows, _ = transformer.token_rows(texts)

    def run(features: dict[str, torch.Tensor]) -> torch.Tensor:
        if "cu_seqlens" in features:
            raise RuntimeError("FlashAttention only supports Ampere GPUs or newer.")
        for module in encoder.module_list:
            features = module(features)
        return features["sentence_embedding"]

    with torch.inference_mode():
        expected = run(transformer.collate_rows(rows, np.arange(3), pin=False))
        for _ in range(2):
            got = packed_or_padded(run, pack(rows, np.arange(3), pin=False), 0, encoder._stop_packing)
    assert torch.allclose(got, expected, atol=1e-6)
    assert encoder.unpadded is False
    assert sum("runs padded from now on" in r.message for r in caplog.records) == 1


def test_a_forward_and_a_training_step_sync_no_device() -> None:
    encoder = tiny_encoder()
    features = encoder.tokenize(["a short one", "a much longer sentence with many more words"])  # padded
    with torch.inference_mode(), DeviceSyncCounter() as syncs:
        encoder(features)
    assert syncs.total == 0, syncs.calls
    examples = [Example((f"sentence {i} about things", f"another text {i} " * (i % 4 + 1)), i % 3) for i in range(48)]
    counts = []
    for steps in (2, 5):
        trainer = Trainer(encoder, [(SoftmaxLoss(encoder), examples)], TrainingConfig(batch_size=8, max_steps=steps))
        with DeviceSyncCounter() as syncs:
            trainer.fit()
        counts.append(syncs.total)
    assert counts[1] == counts[0], f"{counts[1] - counts[0]} syncs in 3 training steps"
