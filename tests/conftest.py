"""Shared fixtures: a tiny random BERT with the real tokenizer, the real default model, STS-B sample data."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from sbert_qdrant import Normalize, Pooling, SentenceEncoder, Transformer
from sbert_qdrant.encoder.loading import DEFAULT_MODEL, resolve_model_folder

DATA = Path(__file__).parent / "data"


def tiny_transformer(max_seq_length: int = 32, seed: int = 0) -> Transformer:
    """A 2-layer, 32-dim random BERT with all-MiniLM-L6-v2's real WordPiece tokenizer."""
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_folder(DEFAULT_MODEL)))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return Transformer(BertModel(config).eval(), tokenizer, max_seq_length=max_seq_length)


@pytest.fixture
def tiny_encoder() -> SentenceEncoder:
    transformer = tiny_transformer()
    return SentenceEncoder([transformer, Pooling(transformer.dimension, "mean"), Normalize()], device="cpu")


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    return resolve_model_folder(None)


@pytest.fixture(scope="session")
def default_encoder() -> SentenceEncoder:
    return SentenceEncoder.load(device="cpu")


@pytest.fixture(scope="session")
def stsb_sample() -> tuple[list[str], list[str], list[float]]:
    with (DATA / "stsb_dev_sample.tsv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows]


@pytest.fixture
def default_model_copy(tmp_path: Path, default_model_dir: Path) -> Path:
    """A writable copy of the default model folder."""
    return Path(shutil.copytree(default_model_dir, tmp_path / "model"))
