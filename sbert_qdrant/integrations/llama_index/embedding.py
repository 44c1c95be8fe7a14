"""LlamaIndex ``BaseEmbedding`` over a SentenceEncoder, and deterministic node ids."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, cast

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode
from pydantic import PrivateAttr

from ...encoder import DEFAULT_MODEL, LoadOptions, SentenceEncoder
from .._encoder import given_or_loaded

#: Namespace of ``node_id``'s UUIDv5s.
NODE_NAMESPACE = uuid.UUID("5d0c8a7e-2f4b-5c1a-8e3d-9b6f4a2c7e15")


def node_id(index: int, document: BaseNode) -> str:
    """The id of chunk ``index`` of ``document``: a UUIDv5 of the two (Qdrant takes UUIDs), the same on every run."""
    return str(uuid.uuid5(NODE_NAMESPACE, f"{document.node_id}:{index}"))


class SbertEmbedding(BaseEmbedding):
    """A SentenceEncoder as LlamaIndex embeddings: texts with the model's document prompt, queries with its query
    prompt (when the model has them), in length-sorted batches of ``embed_batch_size``; async calls encode in a
    worker thread, off the event loop.

    model: a folder, a hub id or None for ``SBERT_QDRANT_MODEL`` if set, else the default model, loaded with the
    load options ``device=``, ``precision=``, ``truncate_dim=`` (``LoadOptions``; each else its ``SBERT_QDRANT_*``
    setting, as ``load_encoder``); or pass an ``encoder`` you already loaded (shared, not copied), as ``encoder=`` or
    first (``SbertEmbedding(encoder)``). Other keyword
    arguments go to LlamaIndex's ``BaseEmbedding``.
    """

    _encoder: SentenceEncoder = PrivateAttr()

    def __init__(
        self,
        model: str | os.PathLike[str] | SentenceEncoder | None = None,
        *,
        encoder: SentenceEncoder | None = None,
        embed_batch_size: int = 32,
        **kwargs: Any,
    ) -> None:
        encoder_given = encoder is not None or isinstance(model, SentenceEncoder)
        load = cast(LoadOptions, {name: kwargs.pop(name) for name in LoadOptions.__annotations__ if name in kwargs})
        encoder, loaded = given_or_loaded(encoder, model, **load)
        name = "SentenceEncoder" if encoder_given else DEFAULT_MODEL if loaded is None else str(loaded)
        super().__init__(model_name=name, embed_batch_size=embed_batch_size, **kwargs)
        self._encoder = encoder

    @classmethod
    def class_name(cls) -> str:
        return "SbertEmbedding"

    @property
    def encoder(self) -> SentenceEncoder:
        return self._encoder

    def tokenize(self, text: str) -> list[int]:
        """The encoder's token ids of ``text`` (no special tokens): a text splitter's ``tokenizer=``, so that chunks
        are cut by what the model reads."""
        ids: list[int] = self._encoder.transformer.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return ids

    @property
    def max_tokens(self) -> int:
        """The most tokens of a text the encoder reads whole (its ``max_seq_length`` less its special tokens and
        document prompt): a text splitter's largest ``chunk_size``."""
        tokenizer = self._encoder.transformer.tokenizer
        overhead = len(tokenizer(self._encoder.document_prompt + "x", verbose=False)["input_ids"]) - 1
        return self._encoder.max_seq_length - overhead

    def _get_query_embedding(self, query: str) -> list[float]:
        vectors = self._encoder.encode_query([query], batch_size=1, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors = self._encoder.encode_document(texts, batch_size=self.embed_batch_size, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
