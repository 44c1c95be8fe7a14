"""The held-out check of ``adapt_to_corpus``: which pseudo-queries are set aside, and the small collection of their
own they are measured in (their texts and the source's best hits), dense and hybrid, before and after training;
a documents collection is read (and its pool written) as documents."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..collection import TextCollection
from ..encoder import SentenceEncoder
from ..errors import InvalidInputError
from ..records import Key
from ..training import RetrievalEvaluator
from ..training.pseudo_queries import PseudoQuery
from ..types import SearchMode

#: The modes measured on the held-out sample.
HELD_OUT_MODES: tuple[SearchMode, ...] = ("dense", "hybrid")


def held_out_split(pairs: list[PseudoQuery], texts: int, seed: int) -> tuple[list[PseudoQuery], list[PseudoQuery]]:
    """(held-out, train): every pair of ``texts`` texts drawn with ``seed``, and the others."""
    positives = list(dict.fromkeys(p.positive for p in pairs))
    if len(positives) <= texts:
        raise InvalidInputError(
            f"pseudo-queries came from {len(positives)} texts, not more than held_out={texts}: nothing would be left "
            "to train on; lower held_out, or add texts."
        )
    chosen = set(random.Random(seed).sample(positives, texts))
    return [p for p in pairs if p.positive in chosen], [p for p in pairs if p.positive not in chosen]


class ModeSearch:
    """A collection searched in one mode, as the evaluator's searcher (``documents``: one hit per document)."""

    def __init__(self, collection: TextCollection, mode: SearchMode, documents: bool = False) -> None:
        self.collection, self.mode, self.documents = collection, mode, documents

    def search_text(self, query: str, limit: int = 10) -> list[Any]:
        if self.documents:
            return self.collection.search_documents(query, limit=limit, mode=self.mode)
        return self.collection.search_text(query, limit=limit, with_payload=False, mode=self.mode)


class DocumentsSource:
    """A collection's documents as pseudo-queries' and the held-out pool's source: each document's text rebuilt
    from its chunks, searched one hit per document."""

    def __init__(self, collection: TextCollection) -> None:
        self.collection = collection

    def count(self) -> int:
        return self.collection.count(kind="documents")

    def scroll(self, scroll_filter: Any = None, limit: int = 10, offset: Key | None = None) -> tuple[list[Any], Any]:
        return self.collection.scroll_documents(limit, offset)

    def search_texts(self, queries: Sequence[str], limit: int = 10, *, mode: Any = "dense") -> list[list[Any]]:
        return [self.collection.search_documents(q, limit=limit, mode=mode) for q in queries]

    def get(self, ids: Sequence[Key]) -> list[Any]:
        return [d for d in (self.collection.get_document(key) for key in ids) if d is not None]


class HeldOutPool:
    """The held-out queries and their pool of texts (theirs and the source's best hits), measured for an encoder."""

    def __init__(
        self,
        source: Any,
        pairs: Sequence[PseudoQuery],
        depth: int,
        folder: Path,
        show: bool | None,
        documents: bool = False,
    ) -> None:
        self.queries = {i: p.query for i, p in enumerate(pairs)}
        self.relevant: dict[int, set[Key]] = {i: {p.positive} for i, p in enumerate(pairs)}
        found = dict.fromkeys(
            hit.id
            for mode in ("dense", "sparse")
            for hits in source.search_texts(list(self.queries.values()), limit=depth, mode=mode)
            for hit in hits
        )
        found.update(dict.fromkeys(p.positive for p in pairs))
        texts = {stored.id: stored.text for stored in source.get(list(found)) if stored.text}
        self.texts = texts
        self.folder, self.show, self.documents = folder, show, documents

    def scores(self, encoder: SentenceEncoder) -> dict[str, float]:
        with TextCollection(
            "held-out", encoder, location=self.folder, recreate=True, show_progress_bar=self.show
        ) as pool:
            write = pool.upsert_documents if self.documents else pool.upsert_texts
            write(list(self.texts.values()), ids=list(self.texts))
            return {
                mode: RetrievalEvaluator(
                    self.queries, {}, self.relevant, searcher=ModeSearch(pool, mode, self.documents)
                )(encoder)["ndcg@10"]
                for mode in HELD_OUT_MODES
            }
