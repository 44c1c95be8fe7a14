"""Shared fixtures: a tiny random BERT with the real tokenizer, the real default model, STS-B sample data,
collections on every engine (``make``), and a module's static int8 calibration cache and encoder."""

from __future__ import annotations

import csv
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from flavours import ENGINES, FLAVOURS, Engines
from int8_support import nli_sentences

from sbert_qdrant import SentenceEncoder, testing
from sbert_qdrant.encoder.loading import resolve_model_folder
from sbert_qdrant.testing import tiny_transformer

__all__ = ["tiny_transformer"]  # imported by test modules from here

DATA = Path(__file__).parent / "data"


@pytest.fixture
def tiny_encoder() -> SentenceEncoder:
    return testing.tiny_encoder()


@pytest.fixture(params=[(f, e) for f in FLAVOURS for e in ENGINES], ids=lambda p: "-".join(p))
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engines]:
    """Opens collections of one flavour (sync, async) on one engine (edge, memory); the server suite overrides it."""
    engines = Engines(*request.param, tmp_path)
    yield engines
    engines.close()


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    return resolve_model_folder(None)


@pytest.fixture(scope="session")
def default_encoder() -> SentenceEncoder:
    return SentenceEncoder.load(device="cpu", precision="fp32")


@pytest.fixture(scope="session")
def stsb_sample() -> tuple[list[str], list[str], list[float]]:
    with (DATA / "stsb_dev_sample.tsv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows]


@pytest.fixture
def default_model_copy(tmp_path: Path, default_model_dir: Path) -> Path:
    """A writable copy of the default model folder."""
    return Path(shutil.copytree(default_model_dir, tmp_path / "model"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("int8-cache")
        patch.setenv("SBERT_QDRANT_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def static_encoder(cache: Path) -> SentenceEncoder:
    """The default model in static int8, calibrated on the NLI sample into this module's ``cache``."""
    return SentenceEncoder.load(device="cpu", precision="int8", calibration_texts=nli_sentences())
