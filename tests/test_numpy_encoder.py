"""NumpyEncoder: the real default model on NumPy gives SentenceEncoder's fp32 vectors (cosine >= 0.99999), the same
token ids, identity and token limit; tiny random BERTs check each pooling mode and a cut; folders it cannot run are
refused naming why; and it imports neither torch nor transformers."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from child import run_child

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.encoder import Dense, EncoderSpec, Normalize, NumpyEncoder, Pooling
from sbert_qdrant.encoder.loading import resolve_model_folder
from sbert_qdrant.errors import UnsupportedError
from sbert_qdrant.testing import tiny_transformer

QUERIES = [
    "where did I park the car?",
    "How do I reset my password if I no longer have access to my email?",
    "Héllo Wörld: naïve café, 中文 and an emoji 🎉",
    "x",
    # over the model's 256 tokens: cut as the torch encoder cuts it
    " ".join(["The history of computing spans mechanical calculators, vacuum tubes and transistors."] * 30),
]


@pytest.fixture(scope="module")
def numpy_default() -> NumpyEncoder:
    return NumpyEncoder.load()


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))


def test_the_default_model_gives_the_torch_encoders_vectors_and_identity(
    numpy_default: NumpyEncoder, default_encoder: SentenceEncoder
) -> None:
    ours, theirs = numpy_default.encode_query(QUERIES), default_encoder.encode_query(QUERIES)
    assert ours.shape == theirs.shape == (len(QUERIES), default_encoder.dimension) and ours.dtype == np.float32
    assert cosines(ours, theirs).min() >= 0.99999
    assert cosines(numpy_default.encode_document(QUERIES), default_encoder.encode_document(QUERIES)).min() >= 0.99999
    assert numpy_default.identity == default_encoder.identity
    assert (numpy_default.dimension, numpy_default.normalizes) == (default_encoder.dimension, True)
    assert numpy_default.max_seq_length == default_encoder.max_seq_length == 256
    assert numpy_default.document_token_limit == default_encoder.document_token_limit
    assert numpy_default.token_spans(QUERIES[2]) == default_encoder.token_spans(QUERIES[2])
    torch_ids, torch_cut = default_encoder.transformer.tokenize(QUERIES)
    numpy_ids, numpy_cut = numpy_default._token_ids(QUERIES)
    assert [list(row) for row in numpy_ids] == torch_ids and numpy_cut == torch_cut == 1


@pytest.mark.parametrize("modes", [["mean"], ["cls"], ["max"], ["mean_sqrt_len"], ["weighted_mean"], ["cls", "max"]])
def test_each_pooling_mode_of_a_tiny_bert(tmp_path: Path, modes: list[str]) -> None:
    transformer = tiny_transformer(seed=1)
    encoder = SentenceEncoder([transformer, Pooling(transformer.dimension, modes), Normalize()], device="cpu")
    encoder.save(tmp_path / "tiny")
    ours = NumpyEncoder.load(tmp_path / "tiny")
    assert ours.identity == SentenceEncoder.load(tmp_path / "tiny", precision="fp32").identity
    assert cosines(ours.encode_query(QUERIES), encoder.encode_query(QUERIES)).min() >= 0.99999


def test_a_cut_is_the_torch_encoders_cut(numpy_default: NumpyEncoder, default_encoder: SentenceEncoder) -> None:
    cut = NumpyEncoder.load(truncate_dim=128)
    theirs = SentenceEncoder.load(precision="fp32", truncate_dim=128)
    assert cut.dimension == 128 and cut.identity == theirs.identity != numpy_default.identity
    ours = cut.encode_query(QUERIES)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert cosines(ours, theirs.encode_query(QUERIES)).min() >= 0.99999


def test_folders_it_cannot_run_are_refused_naming_why(tmp_path: Path) -> None:
    transformer = tiny_transformer(seed=2)
    dense = SentenceEncoder(
        [transformer, Pooling(transformer.dimension), Dense(transformer.dimension, 8)], device="cpu"
    )
    dense.save(tmp_path / "dense")
    with pytest.raises(UnsupportedError, match=r"Transformer -> Pooling -> \[Normalize\] only.*SentenceEncoder"):
        NumpyEncoder.load(tmp_path / "dense")
    other = tmp_path / "roberta"
    shutil.copytree(resolve_model_folder(None), other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(config | {"model_type": "roberta", "hidden_act": "swish"}))
    with pytest.raises(UnsupportedError, match=r"model_type 'roberta' \(BERT only\).*hidden_act 'swish'"):
        NumpyEncoder.load(other)
    with pytest.raises(UnsupportedError, match="precision='int8'"):
        EncoderSpec(precision="int8").load_numpy()
    with pytest.raises(UnsupportedError, match="device='cuda'"):
        EncoderSpec(device="cuda").load_numpy()


_WITHOUT_TORCH = """
import json, sys
from sbert_qdrant.encoder import EncoderSpec
encoder = EncoderSpec().load_numpy()
vectors = encoder.encode_query(["where did I park the car?"])
print(json.dumps([encoder.identity, vectors.shape[1], sorted({"torch", "transformers"} & set(sys.modules))]))
"""


def test_it_imports_neither_torch_nor_transformers(default_encoder: SentenceEncoder) -> None:
    run = run_child([sys.executable, "-c", _WITHOUT_TORCH])
    assert run.returncode == 0, run.stderr[-2000:]
    identity, dimension, imported = json.loads(run.stdout.splitlines()[-1])
    assert (identity, dimension, imported) == (default_encoder.identity, 384, [])
