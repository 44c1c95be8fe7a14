"""``EncoderSpec``: the configured encoder's load options as one value, read from the settings, overridden by name,
carried whole through load_encoder, the CLI's load flags and the integrations."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from pathlib import Path

import pytest

from sbert_qdrant import EncoderSpec, InvalidArgumentError, SentenceEncoder, Settings, load_encoder, testing
from sbert_qdrant.cli import build_parser
from sbert_qdrant.cli._load import encoder_spec
from sbert_qdrant.encoder import LoadOptions


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models") / "tiny-bert"
    testing.tiny_encoder().save(folder)
    return folder


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tiny_dir: Path) -> None:
    monkeypatch.setenv("SBERT_QDRANT_MODEL", str(tiny_dir))
    monkeypatch.setenv("SBERT_QDRANT_DEVICE", "cpu")
    monkeypatch.setenv("SBERT_QDRANT_PRECISION", "fp32")
    monkeypatch.setenv("SBERT_QDRANT_TRUNCATE_DIM", "16")


def test_every_option_is_a_setting_a_load_argument_and_a_flag() -> None:
    """A new option is one field: the settings, SentenceEncoder.load, the integrations' LoadOptions and the CLI's
    flags all carry the same names, so nothing between them lists the options by hand."""
    names = EncoderSpec.names()
    assert names == ["model", *LoadOptions.__annotations__]
    assert set(names) <= set(Settings.model_fields)
    assert set(names) <= set(inspect.signature(SentenceEncoder.load).parameters)
    assert set(names) <= set(inspect.signature(load_encoder).parameters)
    verbs = {
        "encode": [],
        "index": ["f"],
        "search": ["q"],
        "dedup": [],
        "demo": [],
        "mine-negatives": ["p", "--output=o"],
        "adapt-corpus": ["--output=o"],
    }
    for verb, rest in verbs.items():
        args = build_parser([verb]).parse_args([verb, *rest])
        assert set(names) <= set(vars(args)), verb


def test_the_settings_are_read_and_given_options_win(environment: None, tiny_dir: Path) -> None:
    spec = EncoderSpec.of()
    assert spec == EncoderSpec(str(tiny_dir), "cpu", "fp32", 16)
    assert EncoderSpec.of(precision="bf16", truncate_dim=None) == dataclasses.replace(spec, precision="bf16")
    assert EncoderSpec.of(Settings(precision="auto", truncate_dim=8)).truncate_dim == 8  # settings passed in
    assert EncoderSpec.of(model=tiny_dir).model == str(tiny_dir)  # a path named as a str, as in every process
    assert pickle.loads(pickle.dumps(spec)) == spec and hash(spec) == hash(EncoderSpec.of())
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.precision = "fp16"  # type: ignore[misc]


def test_load_encoder_loads_the_spec(environment: None) -> None:
    encoder = load_encoder()
    assert (encoder.dimension, encoder.precision) == (16, "fp32")
    assert load_encoder(truncate_dim=4).dimension == 4
    assert EncoderSpec.of().load().identity == encoder.identity
    assert load_encoder(max_seq_length=8).max_seq_length == 8  # other options go to SentenceEncoder.load


def test_bad_options_are_refused_naming_them(monkeypatch: pytest.MonkeyPatch, environment: None) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown load option"):
        EncoderSpec.of(max_seq_length=8)  # type: ignore[call-arg]
    with pytest.raises(InvalidArgumentError, match="truncate_dim=0 must be"):
        EncoderSpec(truncate_dim=0)
    monkeypatch.setenv("SBERT_QDRANT_TRUNCATE_DIM", "400")
    with pytest.raises(InvalidArgumentError, match=r"truncate_dim=400 must be .* from 1 to 32"):
        load_encoder()  # the upper bound is the model's, known once it is loaded
    with pytest.raises(InvalidArgumentError, match="model=3 must be a str"):
        EncoderSpec(model=3)  # type: ignore[arg-type]


def test_the_cli_flags_fill_the_spec_over_the_settings(environment: None, tiny_dir: Path) -> None:
    args = build_parser(["encode"]).parse_args(["encode", "--truncate-dim", "8", "--device", "cpu"])
    assert encoder_spec(args) == EncoderSpec(str(tiny_dir), "cpu", "fp32", 8)
    args = build_parser(["search"]).parse_args(["search", "q", "--precision", "auto"])
    assert encoder_spec(args) == EncoderSpec(str(tiny_dir), "cpu", "auto", 16)
