"""Search parameters of the dense search (``search_params=``): exact search, and quantized collections' rescoring
and oversampling, on the engines that have them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flavours import Engines
from qdrant_client import models

from sbert_qdrant import InvalidArgumentError, SentenceEncoder, TextCollection

TEXTS = [f"text number {i} about topic {i % 17} and thing {i % 5}" for i in range(400)]
QUERY = "text about topic 3 and thing 2"


def quantization(rescore: bool, oversampling: float | None = None) -> models.SearchParams:
    return models.SearchParams(quantization=models.QuantizationSearchParams(rescore=rescore, oversampling=oversampling))


def test_exact_search_matches_numpy_on_every_engine(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    # local mode stores float32 only and refuses a storage preset (test_matryoshka.py)
    coll = make.open(tiny_encoder, quantization=None if make.engine == "memory" else "int8")
    coll.upsert_texts(TEXTS)
    exact = np.sort(tiny_encoder.encode_document(TEXTS) @ tiny_encoder.encode_query([QUERY])[0])[::-1][:5]
    for mode in ("dense", "hybrid"):
        hits = coll.search_text(QUERY, limit=5, mode=mode, search_params=models.SearchParams(exact=True))
        assert len(hits) == 5, mode
    scores = [h.score for h in coll.search_text(QUERY, limit=5, search_params=models.SearchParams(exact=True))]
    assert np.allclose(scores, exact, atol=1e-4)
    with pytest.raises(InvalidArgumentError, match=r"search_params=.* must be a qdrant_client.models.SearchParams"):
        coll.search_text(QUERY, search_params={"exact": True})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="search_params="):
        coll.search_documents(QUERY, search_params="exact")  # type: ignore[arg-type]


def test_binary_quantization_scores_are_rescored_on_request(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    """Qdrant Edge searches the binary codes; rescoring with the original vectors (and oversampling) restores
    cosine scores and recall."""
    with TextCollection("q", tiny_encoder, location=tmp_path, quantization="binary") as coll:
        coll.upsert_texts(TEXTS)
        coll.optimize()
        vectors = tiny_encoder.encode_document(TEXTS)
        cosine = vectors @ tiny_encoder.encode_query([QUERY])[0]
        raw = coll.search_text(QUERY, limit=10, search_params=quantization(rescore=False))
        assert max(h.score for h in raw) > 1.0  # the codes' own score, not a cosine
        best = set(np.argsort(-cosine)[:10].tolist())
        ids = coll.upsert_texts(TEXTS)  # the same ids again, to map hits to rows

        def recall(hits: list) -> float:
            return len({ids.index(h.id) for h in hits} & best) / 10

        rescored = coll.search_text(QUERY, limit=10, search_params=quantization(rescore=True, oversampling=8.0))
        assert all(h.score == pytest.approx(cosine[ids.index(h.id)], abs=1e-4) for h in rescored)
        assert recall(rescored) >= recall(raw)
        documents = coll.search_documents(QUERY, search_params=quantization(rescore=True))
        assert documents == []  # no documents here; the parameters pass through the grouped search too
