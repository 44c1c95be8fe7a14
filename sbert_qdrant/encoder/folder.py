"""What a sentence-transformers model folder says, read without torch: its JSON files, the Pooling module's modes and
the Transformer's token limit, shared by the torch modules (``Pooling``, ``Transformer``) and ``NumpyEncoder``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError

SBERT_CONFIG_FILE = "sentence_bert_config.json"
MODULES_FILE = "modules.json"
MODEL_CONFIG_FILE = "config_sentence_transformers.json"
#: Tokenizers without a length limit report a huge ``model_max_length`` (transformers uses 1e30).
NO_TOKENIZER_LIMIT = 10**9

#: Our mode names -> sentence-transformers' names, in sentence-transformers' legacy concatenation order.
ST_MODE_NAMES = {
    "cls": "cls",
    "max": "max",
    "mean": "mean",
    "mean_sqrt_len": "mean_sqrt_len_tokens",
    "weighted_mean": "weightedmean",
    "last_token": "lasttoken",
}
_LEGACY_KEYS = {
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean": "pooling_mode_mean_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
    "weighted_mean": "pooling_mode_weightedmean_tokens",
    "last_token": "pooling_mode_lasttoken",
}
POOLING_MODES = tuple(ST_MODE_NAMES)


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object, naming the file on failure."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelLoadError(f"{path} is missing; the model folder is incomplete.") from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not valid JSON ({exc}); restore the file.") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} must hold a JSON object, not {type(data).__name__}.")
    return data


def read_model_config(folder: Path) -> dict[str, Any]:
    """The folder's model-level settings with ``prompts`` checked (a dict of str); empty when the file is absent."""
    path = folder / MODEL_CONFIG_FILE
    if not path.is_file():
        return {}
    config = read_json(path)
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(
        isinstance(name, str) and isinstance(text, (str, type(None))) for name, text in prompts.items()
    ):
        raise ModelLoadError(f"{path}: 'prompts' must map prompt names to strings, not {prompts!r}; fix the file.")
    # sentence-transformers reads a null prompt as the empty prompt
    config["prompts"] = {name: text or "" for name, text in prompts.items()}
    default = config.get("default_prompt_name")
    if default is not None and default not in config["prompts"]:
        raise ModelLoadError(
            f"{path}: default_prompt_name={default!r} is not one of its prompts {sorted(config['prompts'])}; "
            "add that prompt or set default_prompt_name to null."
        )
    return config


def write_model_config(folder: Path, config: dict[str, Any]) -> None:
    """Write ``config_sentence_transformers.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODEL_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def pooling_settings(config: dict[str, Any]) -> tuple[int, list[str], bool]:
    """A Pooling ``config.json`` (either of sentence-transformers' forms) as (dimension, our mode names,
    include_prompt)."""
    dimension = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    if not isinstance(dimension, int):
        raise ModelLoadError(f"pooling config {config!r} has no integer embedding dimension.")
    if "pooling_mode" in config:
        st_modes = config["pooling_mode"]
        st_modes = [st_modes] if isinstance(st_modes, str) else list(st_modes)
    else:
        st_modes = [ST_MODE_NAMES[m] for m, key in _LEGACY_KEYS.items() if config.get(key)]
    ours = {st: mode for mode, st in ST_MODE_NAMES.items()}
    unknown = [m for m in st_modes if m not in ours]
    if unknown or not st_modes:
        raise ModelLoadError(f"pooling config names modes {st_modes!r}; sbert-qdrant supports {sorted(ours)}.")
    include_prompt = config.get("include_prompt", True)
    if not isinstance(include_prompt, bool):
        raise ModelLoadError(f"pooling config has include_prompt={include_prompt!r}; it must be true or false.")
    return dimension, [ours[m] for m in st_modes], include_prompt


def pooling_config(dimension: int, modes: Sequence[str], include_prompt: bool) -> dict[str, Any]:
    """The Pooling ``config.json`` of these settings: the legacy keys every sentence-transformers release reads,
    where the modes are in its legacy order."""
    if tuple(m for m in POOLING_MODES if m in modes) == tuple(modes):
        flags: dict[str, Any] = {key: mode in modes for mode, key in _LEGACY_KEYS.items()}
        return {"word_embedding_dimension": dimension} | flags | {"include_prompt": include_prompt}
    return {
        "embedding_dimension": dimension,
        "pooling_mode": [ST_MODE_NAMES[m] for m in modes],
        "include_prompt": include_prompt,
    }


def transformer_settings(folder: Path) -> dict[str, Any]:
    """The Transformer's ``sentence_bert_config.json`` ({} when absent)."""
    path = folder / SBERT_CONFIG_FILE
    return read_json(path) if path.is_file() else {}


def token_limit(sbert_config: dict[str, Any], tokenizer_limit: float | None, positions: int | None) -> int:
    """The Transformer's ``max_seq_length``: the saved one; else (sentence-transformers >= 5 saves it as the
    tokenizer's ``model_max_length``) the tokenizer's, capped by the model's positions; else min(positions, 512)."""
    saved = sbert_config.get("max_seq_length")
    if saved is not None:
        return int(saved)
    if sbert_config and tokenizer_limit is not None and tokenizer_limit < NO_TOKENIZER_LIMIT:
        return min(int(tokenizer_limit), int(positions or tokenizer_limit))
    return min(positions or NO_TOKENIZER_LIMIT, 512)
