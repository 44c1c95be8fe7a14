"""Writes from the Ray workers into a Qdrant server, in parallel: a ``Datasink`` whose tasks each open the collection
on the server and write their rows through its own pipeline (ids, payloads, checks, batches under the server's
request limit, the retry policy of sbert-qdrant's server store).

Not run on the machine this was written on (no Qdrant server there): its test runs when ``QDRANT_URL`` is set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from ray.data import Datasink
from ray.data.block import Block, BlockAccessor
from ray.data.datasource.datasink import WriteResult

from ...collection import TextCollection
from ...protocols import TextEncoder
from ...records import Key, UpsertResult
from ...settings import Settings
from ...types import OnConflict
from ._encode import ENCODER_COLUMN, Batch, Columns
from ._rows import record

_Counts = tuple[list[Key], int, int]


class QdrantDatasink(Datasink[_Counts]):
    """``dataset.write_datasink(QdrantDatasink(...))`` for an encoded dataset (``EncodeTexts``/``EncodeDocuments``):
    every write task opens ``collection``'s name on the server at ``url`` (API key: ``QDRANT_API_KEY``) with its
    encoder and writes its rows; ``result`` holds the ids (in the order the tasks finished) and counts."""

    def __init__(
        self,
        collection: TextCollection,
        url: str,
        columns: Columns,
        on_conflict: OnConflict,
        documents: bool,
        chunking: dict[str, Any],
    ) -> None:
        self.collection_name = collection.collection_name
        self.encoder: TextEncoder = collection.encoder
        self.url = url
        self.columns = columns
        self.on_conflict = on_conflict
        self.documents = documents
        self.chunking = chunking
        self.result = UpsertResult()

    def write(self, blocks: Iterable[Block], ctx: Any) -> _Counts:
        ids: list[Key] = []
        written = skipped = 0
        with TextCollection(self.collection_name, self.encoder, url=self.url, settings=Settings()) as collection:
            for block in blocks:
                batch = cast(Batch, BlockAccessor.for_block(block).to_numpy())
                rows = range(len(batch[self.columns.text]))
                if not rows:
                    continue
                identity = str(batch[ENCODER_COLUMN][0])
                records = [record(batch, row, row, self.columns, identity) for row in rows]
                if self.documents:
                    result = collection.upsert_documents(
                        records, on_conflict=self.on_conflict, vectors_from=identity, **self.chunking
                    )
                else:
                    result = collection.upsert_texts(records, on_conflict=self.on_conflict, vectors_from=identity)
                ids.extend(result)
                written += result.written
                skipped += result.skipped
        return ids, written, skipped

    def on_write_complete(self, write_result: WriteResult[_Counts]) -> None:
        for ids, written, skipped in write_result.write_returns:
            self.result.extend(ids)
            self.result.written += written
            self.result.skipped += skipped
