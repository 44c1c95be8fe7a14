"""The contract shared by every encoder module, and its folder I/O.

A module maps a features dict to a features dict (``token_embeddings``, ``attention_mask``,
``sentence_embedding``, ...), as in sentence-transformers, and saves itself as ``config.json``
plus ``model.safetensors`` in its own folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from ..errors import ModelLoadError
from .folder import read_json

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"

_ModuleT = TypeVar("_ModuleT", bound="EncoderModule")


class EncoderModule(nn.Module):
    """A step of the encoder pipeline that saves to and loads from a folder."""

    #: The type written to ``modules.json``; sentence-transformers reads the standard ones.
    module_type: ClassVar[str]

    def config(self) -> dict[str, Any]:
        """The JSON-serialisable constructor arguments."""
        raise NotImplementedError

    def save(self, folder: Path) -> None:
        """Write ``config.json`` and, when the module has weights, ``model.safetensors``."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CONFIG_FILE).write_text(json.dumps(self.config(), indent=2) + "\n")
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        if state:
            save_file(state, str(folder / WEIGHTS_FILE))

    @classmethod
    def from_config(cls: type[_ModuleT], config: dict[str, Any]) -> _ModuleT:
        """Build the module from its saved configuration."""
        return cls(**config)

    @classmethod
    def load(cls: type[_ModuleT], folder: Path) -> _ModuleT:
        """Read a module saved by :meth:`save` (or by sentence-transformers)."""
        module = cls.from_config(read_json(folder / CONFIG_FILE))
        expected = module.state_dict()
        if expected:
            module.load_state_dict(read_weights(folder, expected.keys()))
        return module


def read_weights(folder: Path, keys: Any) -> dict[str, torch.Tensor]:
    """Load ``model.safetensors`` from a module folder and check it has exactly ``keys``."""
    path = folder / WEIGHTS_FILE
    if not path.is_file():
        pickled = [p.name for p in folder.glob("*.bin")]
        hint = f" (found pickle files {pickled}; convert them to safetensors)" if pickled else ""
        raise ModelLoadError(f"{path} is missing{hint}; the module's weights cannot be loaded.")
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is corrupt or truncated ({exc}); re-save or re-download it.") from exc
    expected = set(keys)
    if set(state) != expected:
        raise ModelLoadError(
            f"{path} holds tensors {sorted(state)} but the module expects {sorted(expected)}; "
            "the folder does not match its config.json."
        )
    return state
