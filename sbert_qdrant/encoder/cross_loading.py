"""Reading and writing the sentence-transformers CrossEncoder folder format (safetensors only).

A cross-encoder folder is a Hugging Face ``*ForSequenceClassification`` checkpoint (``config.json``,
``model.safetensors``, tokenizer files). sentence-transformers 6 adds ``modules.json`` naming one Transformer of task
"sequence-classification" (its ``sentence_bert_config.json``) and ``config_sentence_transformers.json`` (model type,
activation). Older folders keep the activation in ``config.json``: under ``sentence_transformers`` (v4, v5) or
``sbert_ce_default_activation_function`` (before v4). The token limit is the tokenizer's ``model_max_length``, capped
at the model's position embeddings, as sentence-transformers reads it.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from ..errors import ModelLoadError
from ..types import Activation
from .folder import MODEL_CONFIG_FILE, MODULES_FILE, SBERT_CONFIG_FILE, read_json, read_model_config
from .transformer import Transformer, quiet_transformers, require_safetensors

logger = logging.getLogger(__name__)

#: Activation name -> the class path sentence-transformers writes and reads (``activation_fn``).
ACTIVATION_PATHS: dict[str, str] = {
    "sigmoid": "torch.nn.modules.activation.Sigmoid",
    "identity": "torch.nn.modules.linear.Identity",
    "softmax": "torch.nn.modules.activation.Softmax",
    "tanh": "torch.nn.modules.activation.Tanh",
}
_ACTIVATION_NAMES = {path: name for name, path in ACTIVATION_PATHS.items()}
_ST_TRANSFORMER = "sentence_transformers.base.modules.transformer.Transformer"
#: sentence_bert_config.json of a sequence-classification Transformer, as sentence-transformers 6 writes it.
_SEQUENCE_CLASSIFICATION: dict[str, Any] = {
    "transformer_task": "sequence-classification",
    "modality_config": {"text": {"method": "forward", "method_output_name": "logits"}},
    "module_output_name": "scores",
}
_NO_TOKENIZER_LIMIT = 10**9


def default_activation(num_labels: int) -> Activation:
    """sentence-transformers' default: sigmoid for one score, the raw logits for several classes."""
    return "sigmoid" if num_labels == 1 else "identity"


def _modules(folder: Path) -> list[dict[str, Any]] | None:
    path = folder / MODULES_FILE
    if not path.is_file():
        return None
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not valid JSON ({exc}); restore the file.") from exc
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ModelLoadError(f"{path} must be a JSON list of modules.")
    return entries


def transformer_folder(folder: Path) -> Path:
    """Where a model folder keeps its transformer: modules.json's Transformer entry, else the folder itself."""
    entries = _modules(folder) or []
    found = [e for e in entries if str(e.get("type", "")).endswith(".Transformer")]
    return folder / str(found[0].get("path", "")) if found else folder


def is_cross_encoder(folder: Path) -> bool:
    """Whether a folder holds a cross-encoder (sentence-transformers' model type, or a classification checkpoint)."""
    if (folder / MODEL_CONFIG_FILE).is_file() and _modules(folder) is not None:
        return read_json(folder / MODEL_CONFIG_FILE).get("model_type") == "CrossEncoder"
    if not (folder / "config.json").is_file():
        return False
    architectures = read_json(folder / "config.json").get("architectures") or []
    return any(str(a).endswith("ForSequenceClassification") for a in architectures)


def _check_cross_encoder_folder(folder: Path) -> dict[str, Any]:
    """Refuse a folder that is not a sequence-classification cross-encoder; returns its model-level settings."""
    start = f"to train a cross-encoder from its weights, use CrossEncoder.from_transformer({str(folder)!r})"
    entries = _modules(folder)
    config = read_model_config(folder)
    if entries is not None:
        model_type = config.get("model_type", "SentenceTransformer")
        types = [str(e.get("type", "")).rsplit(".", 1)[-1] for e in entries]
        if model_type != "CrossEncoder":
            raise ModelLoadError(
                f"{folder} holds a {model_type} (modules {types}), not a cross-encoder; load it with "
                f"SentenceEncoder.load, or {start}."
            )
        sbert_config = transformer_folder(folder) / SBERT_CONFIG_FILE
        task = read_json(sbert_config).get("transformer_task") if sbert_config.is_file() else None
        if types != ["Transformer"] or task != "sequence-classification":
            raise ModelLoadError(
                f"{folder} holds a cross-encoder with modules {types} and transformer_task={task!r}; sbert-qdrant "
                "loads sequence-classification cross-encoders (one Transformer module) only."
            )
    elif not is_cross_encoder(folder):
        raise ModelLoadError(f"{folder} holds no sequence-classification model (see its config.json); {start}.")
    if config.get("default_prompt_name") is not None:
        raise ModelLoadError(
            f"{folder / MODEL_CONFIG_FILE} puts prompt {config['default_prompt_name']!r} before every pair, which "
            "sbert-qdrant's CrossEncoder does not do; set default_prompt_name to null to load it without."
        )
    return {k: v for k, v in config.items() if k not in ("model_type", "activation_fn")}


def _token_limit(tokenizer: Any, model: Any, folder: Path) -> int | None:
    """The saved max_seq_length, else the tokenizer's limit capped at the position embeddings (None: no limit)."""
    path = folder / SBERT_CONFIG_FILE
    saved = read_json(path).get("max_seq_length") if path.is_file() else None
    if saved is not None:
        return int(saved)
    limit = int(min(tokenizer.model_max_length, _NO_TOKENIZER_LIMIT))
    if limit >= _NO_TOKENIZER_LIMIT:
        return None
    positions = getattr(model.config, "max_position_embeddings", None)
    return min(limit, int(positions)) if positions else limit


def read_saved_activation(folder: Path, config: Any) -> Activation | None:
    """The activation a folder names, in sentence-transformers' order of precedence (None: none named)."""
    own = read_model_config(folder).get("activation_fn")
    legacy = (getattr(config, "sentence_transformers", None) or {}).get("activation_fn")
    for path in (own, legacy, getattr(config, "sbert_ce_default_activation_function", None)):
        if path is None:
            continue
        if path in _ACTIVATION_NAMES:
            return _ACTIVATION_NAMES[path]  # type: ignore[return-value]  # the values are Activation names
        logger.warning(
            "%s names activation %r, which sbert-qdrant does not run; using the default instead "
            "(pass activation=... to predict to choose one of %s).",
            folder,
            path,
            sorted(ACTIVATION_PATHS),
        )
    return None


def read_cross_encoder(
    folder: Path, trust_remote_code: bool = False
) -> tuple[Transformer, Activation | None, dict[str, Any]]:
    """A cross-encoder folder's classification transformer, the activation it names and its other settings."""
    model_config = _check_cross_encoder_folder(folder)
    root = transformer_folder(folder)
    require_safetensors(root)
    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(root), trust_remote_code=trust_remote_code)
            model, info = AutoModelForSequenceClassification.from_pretrained(
                str(root), trust_remote_code=trust_remote_code, use_safetensors=True, output_loading_info=True
            )
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"cannot load the cross-encoder in {root}: {exc}") from exc
    if info["missing_keys"]:
        raise ModelLoadError(
            f"{root} lacks weights {sorted(info['missing_keys'])[:5]}; the checkpoint is incomplete or not a "
            "cross-encoder."
        )
    sbert_config = read_json(root / SBERT_CONFIG_FILE) if (root / SBERT_CONFIG_FILE).is_file() else {}
    transformer = Transformer(
        model.eval(),
        tokenizer,
        max_seq_length=_token_limit(tokenizer, model, root),
        do_lower_case=bool(sbert_config.get("do_lower_case", False)),
    )
    return transformer, read_saved_activation(folder, model.config), model_config


def new_classifier(base: Transformer, num_labels: int, seed: int) -> Transformer:
    """``base``'s transformer under a fresh ``num_labels`` classification head, initialised from ``seed``."""
    config = copy.deepcopy(base.model.config)
    config.num_labels = num_labels
    with torch.random.fork_rng(devices=[]), quiet_transformers():
        torch.manual_seed(seed)
        model = AutoModelForSequenceClassification.from_config(config)
    found = model.base_model.load_state_dict(base.model.state_dict(), strict=False)
    # The bare model may carry a pooler that this architecture's classifier does not use (RoBERTa): fine.
    unexpected = [k for k in found.unexpected_keys if not k.startswith("pooler.")]
    if found.missing_keys or unexpected:
        raise ModelLoadError(
            f"the {type(base.model).__name__} weights do not fit {type(model).__name__} (missing "
            f"{found.missing_keys[:5]}, unexpected {unexpected[:5]}); this architecture cannot be a cross-encoder."
        )
    return Transformer(model.eval(), base.tokenizer, base.max_seq_length, base.do_lower_case)


#: nDCG@10 (x100) of the int8 order against fp32's that a cross-encoder's int8 may lose and still be "auto"'s pick:
#: the tolerance of the re-rank stage for CPUs (issue 55: within 0.3 of fp32).
RERANK_EXACT_GRADE_LOSS = 0.3


def ranges_file(folder: Path, weights_digest: str) -> Path:
    """Where a cross-encoder folder keeps the static int8 ranges certified for its weights (``certify_int8``)."""
    return folder / f"int8_ranges-{weights_digest}.safetensors"


def write_cross_encoder(
    folder: Path, transformer: Transformer, activation: Activation, model_config: dict[str, Any]
) -> None:
    """Write the folder sentence-transformers 6 writes (and its predecessors read)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = ACTIVATION_PATHS[activation]
    model = transformer.model
    model.config.sentence_transformers = {"activation_fn": path}  # where sentence-transformers 4 and 5 look
    # sentence-transformers reads the token limit from the tokenizer
    transformer.tokenizer.model_max_length = transformer.max_seq_length
    with quiet_transformers():
        model.save_pretrained(str(folder))
        transformer.tokenizer.save_pretrained(str(folder))
    sbert_config = _SEQUENCE_CLASSIFICATION | ({"do_lower_case": True} if transformer.do_lower_case else {})
    (folder / SBERT_CONFIG_FILE).write_text(json.dumps(sbert_config, indent=2) + "\n", encoding="utf-8")
    modules = [{"idx": 0, "name": "0", "path": "", "type": _ST_TRANSFORMER}]
    (folder / MODULES_FILE).write_text(json.dumps(modules, indent=2) + "\n", encoding="utf-8")
    own = {"model_type": "CrossEncoder", "activation_fn": path}
    config = {"prompts": {}, "default_prompt_name": None} | model_config | own
    (folder / MODEL_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
