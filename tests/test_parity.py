"""The real default model: parity with sentence-transformers and the quality of reduced precisions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr
from sentence_transformers import SentenceTransformer

from sbert_qdrant import SentenceEncoder

pytestmark = pytest.mark.slow


def spearman(encoder_encode, s1: list[str], s2: list[str], gold: list[float]) -> float:  # type: ignore[no-untyped-def]
    return spearman_of(encoder_encode(s1), encoder_encode(s2), gold)


def spearman_of(a: np.ndarray, b: np.ndarray, gold: list[float]) -> float:
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return float(100 * spearmanr(cos, gold).statistic)


@pytest.fixture(scope="module")
def reference(default_model_dir: Path) -> SentenceTransformer:
    return SentenceTransformer(str(default_model_dir), device="cpu")


def test_fp32_matches_sentence_transformers_per_sentence_and_in_spearman(
    default_encoder: SentenceEncoder, reference: SentenceTransformer, stsb_sample
) -> None:  # type: ignore[no-untyped-def]
    s1, s2, gold = stsb_sample
    texts = s1 + s2
    ours, theirs = default_encoder.encode(texts), reference.encode(texts)
    assert ours.shape == (len(texts), 384)
    assert (ours * theirs).sum(axis=1).min() >= 0.99999
    n = len(s1)  # the Spearman of the vectors above: encoding the sentences again would prove nothing more
    ours_sp = spearman_of(ours[:n], ours[n:], gold)
    assert abs(ours_sp - spearman_of(theirs[:n], theirs[n:], gold)) <= 0.01
    assert ours_sp > 80  # all-MiniLM-L6-v2 is a real sentence model, not random weights


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_reduced_precision_keeps_spearman_within_a_third_of_a_point(
    precision: str, default_encoder: SentenceEncoder, stsb_sample
) -> None:  # type: ignore[no-untyped-def]
    s1, s2, gold = (column[:150] for column in stsb_sample)  # bf16 is slow on CPUs without native bf16
    reduced = SentenceEncoder.load(device="cpu", precision=precision)  # type: ignore[arg-type]
    exact = spearman(default_encoder.encode, s1, s2, gold)
    assert abs(spearman(reduced.encode, s1, s2, gold) - exact) <= 0.3


def test_default_model_round_trips_through_both_libraries(
    default_encoder: SentenceEncoder, tmp_path: Path, stsb_sample
) -> None:  # type: ignore[no-untyped-def]
    texts = stsb_sample[0][:40]
    default_encoder.save(tmp_path / "ours")
    theirs = SentenceTransformer(str(tmp_path / "ours"), device="cpu")
    np.testing.assert_allclose(theirs.encode(texts), default_encoder.encode(texts), atol=1e-5)
    theirs.save(str(tmp_path / "theirs"))
    again = SentenceEncoder.load(tmp_path / "theirs", device="cpu", precision="fp32")
    np.testing.assert_allclose(again.encode(texts), default_encoder.encode(texts), atol=1e-5)
