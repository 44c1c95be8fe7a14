"""What every part of a collection works with: its checked settings, its engine, and what it learned of the stored
collection (checked, or created on the first write, once).

Written once, for asyncio; ``tools/unasync.py`` derives ``context_sync.py``.
"""

from __future__ import annotations

from qdrant_client import models

from ..documents import texts_only
from ..encoder import Bm25
from ..errors import StoreError
from ..store.protocol_async import AsyncVectorStore
from .runtime_async import Lock
from .schema import CollectionConfig, holds_documents, with_documents


class AsyncCollectionContext:
    """A collection as one instance opened it: ``store`` fixed; ``bm25``, ``documents`` and the slots the stored
    collection records (in ``config``) known once ``ensure`` has checked (or created) the collection in the engine."""

    def __init__(self, config: CollectionConfig, store: AsyncVectorStore, recreate: bool = False) -> None:
        #: The settings as opened, then with every slot the stored collection records (``CollectionConfig.
        #: with_recorded``) once it has been checked.
        self.config = config
        self._opened = config
        self.store = store
        self._recreate = recreate
        self._ready = False
        self._ready_lock = Lock()
        #: BM25 of the collection as it is (None until checked or created, and for a dense-only collection).
        self.bm25: Bm25 | None = None
        #: Whether the collection holds documents (as it was opened, or written by this instance): only then do
        #: text reads pay for the filter that leaves chunks out (local mode evaluates it point by point).
        self.documents = False

    @property
    def name(self) -> str:
        return self.config.collection_name

    async def ensure(self, create: bool) -> None:
        """Check (and on a write, create) the collection once per instance."""
        async with self._ready_lock:
            if self._ready:
                return
            config, name = self.config, self.name
            if self._recreate and create:
                await self.store.drop(name)
                self._recreate = False
            existing = await self.store.describe(name)
            if existing is not None:
                recorded = config.with_recorded(existing)
                self.bm25 = recorded.existing_bm25(existing)
                self.config = recorded
                self.documents = holds_documents(existing.metadata)
            elif not create:
                raise config.missing(await self.store.names())
            else:
                try:
                    await self.store.create(config.spec())
                except OSError as exc:  # a read-only or missing location of an embedded engine
                    raise StoreError(
                        f"cannot create collection {name!r}: {exc.strerror or exc} ({exc.filename}); make the "
                        "location writable or pick another one (location=, --location)."
                    ) from exc
                for field_name, schema in config.payload_indexes_to_create().items():
                    await self.store.create_payload_index(name, field_name, schema)
                self.bm25 = config.bm25
                self.documents = False
            self._ready = True

    async def ensure_writable(self, documents: bool = False) -> None:
        """Create the collection if needed and record, before the first chunk is written, that it holds documents."""
        await self.ensure(create=True)
        self.config.require_filled()
        if documents and not self.documents:
            await self.store.update_metadata(self.name, with_documents(await self.store.metadata(self.name)))
            self.documents = True

    def dropped(self) -> None:
        """Forget what was learned of the collection: it was deleted."""
        self._ready = False
        self.documents = False
        self.config = self._opened

    async def config_for(self, *slots: str | None) -> CollectionConfig:
        """The settings a search of ``slots`` reads: checked against the stored collection first when one names
        no slot this instance was opened with (it may be one the collection records)."""
        known = {slot.name for slot in self.config.layout.slots}
        if any(name is not None and name not in known for name in slots):
            await self.ensure(create=False)
        return self.config

    def texts_only(self, query_filter: models.Filter | None) -> models.Filter | None:
        """The filter of a text read: chunks left out when the collection holds documents."""
        return texts_only(query_filter) if self.documents else query_filter
