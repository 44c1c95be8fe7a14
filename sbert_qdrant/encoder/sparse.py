"""BM25 term weights as sparse vectors, with Qdrant's own tokenizer (the engine's ``Bm25``, run in-process).

Documents get saturated, length-normalised term frequencies; queries get weight 1 per unique term. The inverse
document frequency is left to the engine (a sparse vector with the IDF modifier), so it stays right as a collection
grows. Term ids are the engine's hashes of the terms, so the same vectors work on Qdrant Edge, a server and local mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import qdrant_edge as qe

from ..errors import InvalidArgumentError

#: A sparse vector: (term ids, weights), both in the same order.
Sparse = tuple[list[int], list[float]]


@dataclass(frozen=True)
class Bm25:
    """BM25 settings (Qdrant's ``Bm25Config``): tokenizer language, stopwords, stemming and the k, b, avg_len terms.

    stopwords: True for the language's list, False for none, or your own words (replacing the language's list).
    stemmer: Snowball stemming in the language (True) or none (False).
    avg_len: the expected document length in tokens (length normalisation); BM25's ``b`` weighs it.
    """

    language: str = "english"
    k: float = 1.2
    b: float = 0.75
    avg_len: float = 256.0
    lowercase: bool = True
    ascii_folding: bool = False
    stopwords: bool | tuple[str, ...] = True
    stemmer: bool = True
    min_token_len: int | None = None
    max_token_len: int | None = None
    _model: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.stopwords, (list, set, frozenset)):
            object.__setattr__(self, "stopwords", tuple(sorted(self.stopwords)))
        config = self._engine_config()
        try:
            model = qe.Bm25(config)
        except ValueError as exc:
            raise InvalidArgumentError(f"invalid BM25 settings: {exc}.") from exc
        object.__setattr__(self, "_model", model)

    def _engine_config(self) -> qe.Bm25Config:
        stopwords: Any
        if self.stopwords is True:
            stopwords = _enum_member(
                qe.Language, self.language, "has no stopwords list; pass stopwords=False or your own"
            )
        elif self.stopwords is False:
            stopwords = qe.StopwordsSet(custom=set())
        else:
            stopwords = qe.StopwordsSet(custom=set(self.stopwords))
        stemmer: Any = qe.DisabledStemmer()
        if self.stemmer:
            stemmer = qe.SnowballParams(
                _enum_member(qe.SnowballLanguage, self.language, "has no Snowball stemmer; pass stemmer=False")
            )
        return qe.Bm25Config(
            k=self.k,
            b=self.b,
            avg_len=self.avg_len,
            language=self.language.lower() if hasattr(qe.Language, self.language.capitalize()) else None,
            lowercase=self.lowercase,
            ascii_folding=self.ascii_folding,
            stopwords=stopwords,
            stemmer=stemmer,
            min_token_len=self.min_token_len,
            max_token_len=self.max_token_len,
        )

    def embed_documents(self, texts: Sequence[str]) -> list[Sparse]:
        """Term weights of texts to be stored."""
        return [_plain(self._model.embed_document(text)) for text in texts]

    def embed_query(self, text: str) -> Sparse:
        """The unique terms of a query, weight 1 each."""
        return _plain(self._model.embed_query(text))

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-able values (stored with a collection so that queries tokenize the same way)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        if isinstance(self.stopwords, tuple):
            values["stopwords"] = list(self.stopwords)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Bm25:
        known = {f.name for f in fields(cls) if f.init}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidArgumentError(f"unknown BM25 settings {unknown}; known ones: {sorted(known)}.")
        stopwords = values.get("stopwords", True)
        return cls(**{**values, "stopwords": tuple(stopwords) if isinstance(stopwords, list) else stopwords})


def _enum_member(enum: Any, language: str, missing: str) -> Any:
    member = getattr(enum, str(language).capitalize(), None)
    if member is None:
        names = sorted(name.lower() for name in dir(enum) if name[:1].isupper())
        raise InvalidArgumentError(f"BM25 language={language!r} {missing}, or use one of {names}.")
    return member


def _plain(vector: qe.SparseVector) -> Sparse:
    return list(vector.indices), list(vector.values)
