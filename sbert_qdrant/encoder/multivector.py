"""Late interaction (ColBERT-style): a text as one vector per token, compared by MaxSim (for each query token the
best document token, summed), in the sentence-transformers 6 ``MultiVectorEncoder`` folder format: Transformer ->
token projection (Dense on ``token_embeddings``) -> MultiVectorMask -> Normalize (on ``token_embeddings``).

``MultiVectorEncoder.load(folder)`` reads such a folder (a ColBERT model you bring, or one saved here);
``MultiVectorEncoder.from_encoder(encoder)`` is the training-free variant: the encoder's own token vectors, unit
length, no projection; ``from_encoder(encoder, dimension=128)`` adds a new token projection to train with
``MaxSimRankingLoss`` (sbert_qdrant.training).
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InvalidArgumentError, ModelLoadError
from .batching import CPU_BATCH, DEFAULT_BATCH_TOKENS, batch_cap, encode_pipelined
from .features import Features
from .feed import TokenFeed
from .folder import MODEL_CONFIG_FILE, MODULES_FILE, read_json
from .identity import encoder_identity, model_name, weights_digest
from .layers import Dense
from .loading import resolve_model_folder
from .runtime import length_sorted_batches, resolve_device
from .tokens import TokenRows
from .transformer import Transformer

_ST = "sentence_transformers"
_TYPES = {
    "Transformer": f"{_ST}.base.modules.transformer.Transformer",
    "Dense": f"{_ST}.base.modules.dense.Dense",
    "MultiVectorMask": f"{_ST}.multi_vector_encoder.modules.multi_vector_mask.MultiVectorMask",
    "Normalize": f"{_ST}.base.modules.normalize.Normalize",
}
_TOKENS = "token_embeddings"


class MultiVectorEncoder(torch.nn.Module):
    """Token vectors of texts: ``encode_document`` / ``encode_query`` give one (tokens, dimension) array per text.

    projection: the token-level Dense (None: the transformer's own vectors); normalize: unit-length tokens;
    skiplist_ids: token ids left out of documents' vectors (e.g. punctuation); pool_factor: documents' token
    vectors merged about this many to one (neighbours most alike first), to keep storage down.
    """

    multivector = True
    #: What the Trainer asks of a model: its weights are fp32, never chosen by "auto".
    precision = "fp32"
    auto_precision = False

    def __init__(
        self,
        transformer: Transformer,
        projection: Dense | None = None,
        normalize: bool = True,
        skiplist_ids: frozenset[int] = frozenset(),
        name: str = "multivector",
        pool_factor: int = 1,
        device: str | torch.device | None = None,
    ) -> None:
        super().__init__()
        if isinstance(pool_factor, bool) or not isinstance(pool_factor, int) or pool_factor < 1:
            raise InvalidArgumentError(f"pool_factor={pool_factor!r} must be a positive integer (1: no pooling).")
        self.transformer = transformer
        self.projection = projection
        self.normalize = normalize
        self.skiplist_ids = skiplist_ids
        self.name = name
        self.pool_factor = pool_factor
        self.device = resolve_device(device)
        self.to(self.device).eval()

    # -- what a collection asks ------------------------------------------------------------------------------------

    @property
    def dimension(self) -> int:
        return self.projection.output_dimension if self.projection is not None else self.transformer.dimension

    @property
    def normalizes(self) -> bool:
        return self.normalize

    @property
    def identity(self) -> str:
        """``name@fingerprint`` of the weights, the mask and the pooling: what decides the stored vectors."""
        extra = json.dumps({"skip": sorted(self.skiplist_ids), "norm": self.normalize, "pool": self.pool_factor})
        modules = hashlib.blake2b(extra.encode(), digest_size=3).hexdigest()
        return encoder_identity(self.name, weights_digest(self), "", modules)

    def encode_document(
        self, texts: Sequence[str], batch_size: int | None = None, *, show_progress_bar: bool | None = None
    ) -> list[np.ndarray]:
        """Each stored text's token vectors (special tokens kept, the skiplist left out, pooled)."""
        return [self._pooled(v) for v in self._encode(list(texts), batch_size, skip=True)]

    def encode_query(
        self, texts: Sequence[str], batch_size: int | None = None, *, show_progress_bar: bool | None = None
    ) -> list[np.ndarray]:
        """Each query's token vectors (every token)."""
        return self._encode(list(texts), batch_size, skip=False)

    def similarity(self, query: np.ndarray, document: np.ndarray) -> float:
        """MaxSim: for each query token the best document token's dot product, summed."""
        return float((query @ document.T).max(axis=1).sum())

    # -- encoding --------------------------------------------------------------------------------------------------

    def _encode(self, texts: list[str], batch_size: int | None, skip: bool) -> list[np.ndarray]:
        if isinstance(texts, str) or any(not isinstance(t, str) for t in texts):
            raise InvalidArgumentError("texts must be a list of str; wrap a single text in a list.")
        cap = batch_cap(batch_size, self.device)
        out: list[np.ndarray] = [np.zeros((0, self.dimension), np.float32)] * len(texts)
        if not texts:
            return out
        transformer = self.transformer
        skipped = np.fromiter(self.skiplist_ids if skip else (), dtype=np.int64)

        def compute(features: Features) -> torch.Tensor:
            return self.token_vectors(transformer(features)[_TOKENS]).float()

        def land(rows: TokenRows, start: int, index: np.ndarray, vectors: np.ndarray) -> None:
            for row, i in enumerate(index):
                tokens = rows.ids[rows.starts[i] : rows.starts[i + 1]]
                out[start + i] = np.ascontiguousarray(vectors[row, : len(tokens)][~np.isin(tokens, skipped)])

        if self.device.type == "cpu":
            rows, _ = transformer.token_rows(texts)
            for index in length_sorted_batches(rows.lengths, cap or CPU_BATCH):
                with torch.inference_mode():
                    land(rows, 0, index, compute(transformer.collate_rows(rows, index, pin=False)).numpy())
            return out
        pin = self.device.type == "cuda"
        feed = TokenFeed(texts, transformer.token_rows, operator.attrgetter("lengths"), transformer.collate_rows, pin)
        encode_pipelined(
            feed.chunks(),
            feed.collate,
            compute,
            lambda chunk, index, vectors: land(chunk.tokens, chunk.start, index, vectors),
            self.device,
            DEFAULT_BATCH_TOKENS,
            cap,
        )
        return out

    def token_vectors(self, tokens: torch.Tensor) -> torch.Tensor:
        """The transformer's ``(batch, tokens, width)`` output through the projection and normalization (the part
        ``MaxSimRankingLoss`` trains)."""
        if self.projection is not None:
            tokens = self.projection.activation(self.projection.linear(tokens.to(self.projection.linear.weight.dtype)))
        return torch.nn.functional.normalize(tokens, p=2, dim=-1) if self.normalize else tokens

    def _pooled(self, vectors: np.ndarray) -> np.ndarray:
        """Neighbouring token vectors merged (mean, renormalized) until about ``1 / pool_factor`` are left, the most
        alike pair first: fewer vectors to store, each still close to the tokens it stands for."""
        if self.pool_factor == 1 or len(vectors) <= 2:
            return vectors
        groups = [[row] for row in vectors]
        target = max(2, -(-len(vectors) // self.pool_factor))
        while len(groups) > target:
            means = [np.mean(g, axis=0) for g in groups]
            alike = [float(means[k] @ means[k + 1]) for k in range(len(means) - 1)]
            k = int(np.argmax(alike))
            groups[k : k + 2] = [groups[k] + groups[k + 1]]
        pooled = np.stack([np.mean(g, axis=0) for g in groups]).astype(np.float32)
        if self.normalize:
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled

    # -- making, loading, saving -----------------------------------------------------------------------------------

    @classmethod
    def from_encoder(
        cls, encoder: Any, pool_factor: int = 1, *, dimension: int | None = None, seed: int = 0
    ) -> MultiVectorEncoder:
        """A SentenceEncoder's own token vectors, unit length (its transformer shared, not copied).

        dimension: None is the training-free variant (no projection); a size adds a new token projection to that
        many dimensions (ColBERT's is 128), its initial weights depending on ``seed`` alone, to train with
        ``MaxSimRankingLoss``.
        """
        transformer = getattr(encoder, "transformer", None)
        if not isinstance(transformer, Transformer):
            raise InvalidArgumentError(f"{encoder!r:.60} has no Transformer; pass a SentenceEncoder.")
        if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1):
            raise InvalidArgumentError(f"dimension={dimension!r} must be a positive integer (None: no projection).")
        projection = None
        if dimension is not None:
            projection = Dense(transformer.dimension, dimension, bias=False)
            generator = torch.Generator().manual_seed(seed)
            bound = transformer.dimension**-0.5  # nn.Linear's default range, drawn from our own generator
            with torch.no_grad():
                projection.linear.weight.uniform_(-bound, bound, generator=generator)
        name = f"{getattr(encoder, 'name', 'encoder')}-tokens" + ("" if dimension is None else f"-{dimension}")
        return cls(transformer, projection, True, frozenset(), name, pool_factor, str(encoder.device))

    @classmethod
    def load(
        cls,
        model: str | os.PathLike[str],
        *,
        device: str | torch.device | None = None,
        pool_factor: int = 1,
        precision: str = "fp32",
        max_seq_length: int | None = None,
    ) -> MultiVectorEncoder:
        """A multi-vector model folder in the sentence-transformers 6 format (or a hub id / installed model).

        precision: "fp32" only (what a multi-vector model runs at; the Trainer passes it). max_seq_length: the
        token limit to read texts at (None: the folder's; e.g. 256 for a model trained at 128)."""
        if precision != "fp32":
            raise InvalidArgumentError(f"precision={precision!r}: a MultiVectorEncoder runs at 'fp32' only.")
        folder = resolve_model_folder(model)
        modules = json.loads((folder / MODULES_FILE).read_text(encoding="utf-8"))
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        if not kinds or kinds[0] != "Transformer" or any(k not in _TYPES for k in kinds):
            raise ModelLoadError(
                f"{folder} is not a multi-vector model (modules {kinds}); it needs Transformer -> [Dense] -> "
                "[MultiVectorMask] -> [Normalize], as sentence-transformers' MultiVectorEncoder saves."
            )
        transformer = Transformer.load(folder / modules[0].get("path", ""))
        if max_seq_length is not None:
            transformer.set_max_seq_length(max_seq_length)
        projection, normalize, skiplist = None, False, frozenset[int]()
        for entry, kind in zip(modules[1:], kinds[1:], strict=True):
            sub = folder / entry["path"]
            config = read_json(sub / "config.json") if (sub / "config.json").is_file() else {}
            if kind == "Dense":
                if config.get("module_input_name", _TOKENS) != _TOKENS:
                    raise ModelLoadError(f"{sub}: a multi-vector Dense must read {_TOKENS!r}, not {config}.")
                projection = Dense.load(sub)
            elif kind == "Normalize":
                normalize = config.get("module_input_name", _TOKENS) == _TOKENS
            elif kind == "MultiVectorMask":
                skiplist = _skiplist(transformer, config)
        return cls(transformer, projection, normalize, skiplist, model_name(folder), pool_factor, device)

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write the sentence-transformers 6 ``MultiVectorEncoder`` folder format."""
        root = Path(folder)
        self.transformer.save(root)
        modules: list[dict[str, Any]] = [{"idx": 0, "name": "0", "path": "", "type": _TYPES["Transformer"]}]
        if self.projection is not None:
            self.projection.save(root / "1_Dense")
            config = read_json(root / "1_Dense" / "config.json")
            config |= {"module_input_name": _TOKENS, "module_output_name": _TOKENS}
            (root / "1_Dense" / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            modules.append({"path": "1_Dense", "type": _TYPES["Dense"]})
        words = self.transformer.tokenizer.convert_ids_to_tokens(sorted(self.skiplist_ids))
        mask = {"skiplist_words": words, "skiplist_tasks": ["document"], "keep_only_token_ids": None}
        modules.append({"path": f"{len(modules)}_MultiVectorMask", "type": _TYPES["MultiVectorMask"], "config": mask})
        if self.normalize:
            io = {"module_input_name": _TOKENS, "module_output_name": _TOKENS}
            modules.append({"path": f"{len(modules)}_Normalize", "type": _TYPES["Normalize"], "config": io})
        for index, entry in enumerate(modules[1:], start=1):
            entry |= {"idx": index, "name": str(index)}
            config = entry.pop("config", None)
            if config is not None:
                (root / entry["path"]).mkdir(parents=True, exist_ok=True)
                (root / entry["path"] / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (root / MODULES_FILE).write_text(json.dumps(modules, indent=2) + "\n")
        model_config = {"model_type": "MultiVectorEncoder", "prompts": {"query": "", "document": ""}}
        (root / MODEL_CONFIG_FILE).write_text(json.dumps(model_config, indent=2) + "\n")


def is_multivector_model(folder: Path) -> bool:
    """Whether a model folder holds a multi-vector model (sentence-transformers 6 writes its model_type)."""
    config = folder / MODEL_CONFIG_FILE
    return config.is_file() and read_json(config).get("model_type") == "MultiVectorEncoder"


def _skiplist(transformer: Transformer, config: dict[str, Any]) -> frozenset[int]:
    """The token ids a MultiVectorMask leaves out of documents (its ``skiplist_words``, each one token)."""
    tasks = config.get("skiplist_tasks", ["document"])
    if "document" not in ([tasks] if isinstance(tasks, str) else list(tasks or [])):
        return frozenset()
    words = list(config.get("skiplist_words") or [])
    ids = transformer.tokenizer.convert_tokens_to_ids(words) if words else []
    unknown = transformer.tokenizer.unk_token_id
    return frozenset(int(i) for i in (ids if isinstance(ids, list) else [ids]) if i is not None and i != unknown)
