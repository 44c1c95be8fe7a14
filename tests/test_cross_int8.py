"""A cross-encoder's static int8 on the bi-encoder's rule: ranges calibrated on pairs, checked against fp32 on
held-apart groups, saved with the folder; ``precision="auto"`` runs static int8 only where that check passed for this
CPU's int8 ISA, and ranges of weights trained since are never written."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from sbert_qdrant import CrossEncoder, testing
from sbert_qdrant.encoder.cross_int8 import AGREEMENT, GROUP_SIZE, certification_split, certify_int8, order_agreement
from sbert_qdrant.encoder.int8.calibration import int8_isa
from sbert_qdrant.errors import InvalidArgumentError, InvalidInputError

pytestmark = pytest.mark.skipif(int8_isa() is None, reason="static int8 does not run on this CPU")

WORDS = [
    "cell",
    "gene",
    "protein",
    "tumor",
    "blood",
    "heart",
    "brain",
    "drug",
    "dose",
    "trial",
    "mouse",
    "human",
    "risk",
    "rate",
    "virus",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> CrossEncoder:
    folder = tmp_path_factory.mktemp("encoder")
    testing.tiny_encoder().save(folder)
    cross = CrossEncoder.from_transformer(folder, device="cpu", seed=1)
    with torch.no_grad():
        cross.transformer.model.classifier.weight.mul_(1000)  # a random tiny head gives near-constant scores
    return cross


def test_certified_ranges_travel_with_the_folder_and_auto_runs_them(trained: CrossEncoder, tmp_path: Path) -> None:
    rng = random.Random(0)
    calibration = [(_text(rng, 4), _text(rng, 12)) for _ in range(120)]
    groups = [(_text(rng, 4), [_text(rng, 12) for _ in range(8)]) for _ in range(6)]
    check = certify_int8(trained, calibration, groups)
    assert check.groups == 6 and check.loss >= 0 and check.ranges.losses == {check.isa: {AGREEMENT: check.loss}}
    assert "held-apart groups" in check.report()
    trained.save(tmp_path / "ce")
    assert len(list((tmp_path / "ce").glob("int8_ranges-*.safetensors"))) == 1
    auto = CrossEncoder.load(tmp_path / "ce", device="cpu", precision="auto")
    pairs = [(q, t) for q, texts in groups for t in texts]
    if check.exact_grade:
        assert (auto.precision, auto.int8_mode) == ("int8", "static")
        exact = np.asarray(trained.predict(pairs)).ravel()
        assert order_agreement(exact, np.asarray(auto.predict(pairs)).ravel(), k=48) > 0.99
    fp32 = CrossEncoder.load(tmp_path / "ce", device="cpu", precision="fp32")
    fp32.keep_int8_ranges(replace(check.ranges, losses={check.isa: {AGREEMENT: 5.0}}))  # measured to lose 5 points
    fp32.save(tmp_path / "lossy")
    assert CrossEncoder.load(tmp_path / "lossy", device="cpu", precision="auto").precision != "int8"
    with torch.no_grad():
        fp32.transformer.model.classifier.bias.add_(1.0)  # trained since it was certified: the ranges are stale
    fp32.save(tmp_path / "stale")
    assert not list((tmp_path / "stale").glob("int8_ranges-*.safetensors"))


def test_order_agreement_and_refusals(trained: CrossEncoder, tmp_path: Path) -> None:
    exact = np.array([0.9, 0.5, 0.1, 0.0])
    assert order_agreement(exact, exact) == 1.0 and order_agreement(exact, -exact) < 0.6
    assert order_agreement(np.zeros(3), np.arange(3.0)) == 1.0  # no gains to lose
    with pytest.raises(InvalidInputError, match="two or more candidates"):
        certify_int8(trained, [("a", "b")], [("q", ["only one"])])
    trained.save(tmp_path / "ce")
    bf16 = CrossEncoder.load(tmp_path / "ce", device="cpu", precision="bf16")
    with pytest.raises(InvalidArgumentError, match="needs the fp32 cross-encoder"):
        certify_int8(bf16, [("a", "b")], [("q", ["x", "y"])])


def test_certification_split_holds_queries_apart() -> None:
    rows = [(f"q{i}", f"pos{i}", f"neg{i}") for i in range(10)] + [("q0", "pos0", "more0")]
    pairs, groups = certification_split(rows, groups=3, seed=0)
    held = {query for query, _ in groups}
    assert len(groups) == 3 and not held & {query for query, _ in pairs}
    assert len(pairs) == 2 * 7 + ("q0" not in held)  # q0's rows joined: pos0, neg0, more0
    assert all(len(texts) >= 2 for _, texts in groups)
    single = [(f"a{i}", f"b{i}") for i in range(30)]  # pair data: each held query meets its text and 7 others
    pairs, groups = certification_split(single, groups=10, seed=1, calibration=10)
    assert len(pairs) == 10 and len(groups) == 10
    for query, texts in groups:
        assert texts[0] == "b" + query[1:] and len(texts) == GROUP_SIZE == len(set(texts))
    assert [len(texts) for _, texts in certification_split(single, groups=3)[1]] == [3, 3, 3]  # all 3 held texts
    assert certification_split([("only", "one")]) == ([], [])
    assert len(certification_split(single, groups=100)[1]) == 15  # at most half the queries
