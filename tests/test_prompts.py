"""Query/document prompts: read and written like sentence-transformers, prepended as text, optionally not pooled."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_transformer
from sentence_transformers import SentenceTransformer

from sbert_qdrant import InvalidArgumentError, ModelLoadError, Normalize, Pooling, SentenceEncoder

TEXTS = [
    "A man is playing a guitar.",
    "Two dogs run across the snowy field.",
    "",
    "Stock markets fell sharply today " * 8,  # truncated at max_seq_length=32, prompt included
]
# With both "query" and "document": sentence-transformers adds those two (empty) to any model it loads, so its
# encode_document never reaches "passage" or "corpus"; sbert-qdrant keeps a folder's prompts as written.
PROMPTS = {"query": "query: ", "document": "passage: ", "classification": "Classify the topic: "}
ALL_MODES = ["cls", "max", "mean", "mean_sqrt_len", "weighted_mean", "last_token"]


def build(
    include_prompt: bool = True,
    modes: str | list[str] = "mean",
    prompts: dict[str, str] | None = None,
    default_prompt_name: str | None = None,
) -> SentenceEncoder:
    t = tiny_transformer()
    pooling = Pooling(t.dimension, modes, include_prompt=include_prompt)
    return SentenceEncoder(
        [t, pooling, Normalize()],
        device="cpu",
        prompts=PROMPTS if prompts is None else prompts,
        default_prompt_name=default_prompt_name,
    )


def assert_encoded_alike(got: np.ndarray, want: np.ndarray) -> None:
    """The same texts, encoded in separate calls: equal up to rounding (the CPU's kernels need not repeat bit for
    bit), far closer than another prompt puts them."""
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def vectors_of(model: SentenceEncoder | SentenceTransformer) -> dict[str, np.ndarray]:
    """The vectors parity is checked on: query, document, a named prompt, the default and an explicit prompt."""
    return {
        "query": np.asarray(model.encode_query(TEXTS)),
        "document": np.asarray(model.encode_document(TEXTS)),
        "named": np.asarray(model.encode(TEXTS, prompt_name="classification")),
        "default": np.asarray(model.encode(TEXTS)),
        "explicit": np.asarray(model.encode(TEXTS, prompt="Represent this sentence: ")),
    }


def assert_same_vectors(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    for key in a:
        np.testing.assert_allclose(a[key], b[key], atol=1e-5, err_msg=key)


@pytest.mark.parametrize("include_prompt", [True, False])
def test_prompts_round_trip_through_sentence_transformers_with_same_vectors(
    include_prompt: bool, tmp_path: Path
) -> None:
    # All pooling modes at once: include_prompt=False masks the prompt in each as sentence-transformers does.
    ours = build(include_prompt, ALL_MODES, default_prompt_name="classification")
    ours.save(tmp_path / "ours")
    theirs = SentenceTransformer(str(tmp_path / "ours"), device="cpu")
    assert theirs.prompts == PROMPTS and theirs.default_prompt_name == "classification"
    assert theirs[1].include_prompt is include_prompt
    expected = vectors_of(ours)
    assert_same_vectors(vectors_of(theirs), expected)

    theirs.save(str(tmp_path / "theirs"))
    again = SentenceEncoder.load(tmp_path / "theirs", device="cpu", precision="fp32")
    assert again.max_seq_length == 32  # sentence-transformers 6 writes it to the tokenizer config only
    assert again.prompts == PROMPTS and again.default_prompt_name == "classification"
    again_pooling = again.module_list[1]
    assert isinstance(again_pooling, Pooling) and again_pooling.include_prompt is include_prompt
    assert_same_vectors(vectors_of(again), vectors_of(theirs))


def test_saved_config_holds_prompts_and_keeps_a_loaded_models_other_keys(tmp_path: Path) -> None:
    build(default_prompt_name="query").save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config_sentence_transformers.json").read_text())
    assert config == {
        "similarity_fn_name": "cosine",
        "model_type": "SentenceTransformer",
        "prompts": PROMPTS,
        "default_prompt_name": "query",
    }
    config |= {"similarity_fn_name": "dot", "__version__": {"sentence_transformers": "5.0.0"}}
    (tmp_path / "m" / "config_sentence_transformers.json").write_text(json.dumps(config))
    loaded = SentenceEncoder.load(tmp_path / "m", device="cpu", precision="fp32")
    loaded.prompts["query"] = "search_query: "
    loaded.save(tmp_path / "again")
    again = json.loads((tmp_path / "again" / "config_sentence_transformers.json").read_text())
    assert again == config | {"prompts": PROMPTS | {"query": "search_query: "}}


def test_model_without_prompts_saves_an_empty_prompt_config(tmp_path: Path) -> None:
    encoder = build(prompts={})
    encoder.save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config_sentence_transformers.json").read_text())
    assert config["prompts"] == {} and config["default_prompt_name"] is None
    again = SentenceEncoder.load(tmp_path / "m", device="cpu", precision="fp32")
    assert again.prompts == {} and again.default_prompt_name is None


def test_query_and_document_prompts_are_text_in_front_when_pooled() -> None:
    encoder = build(prompts={"query": "query: ", "passage": "passage: ", "corpus": "corpus: "})
    query, document = encoder.encode_query(TEXTS), encoder.encode_document(TEXTS)
    assert_encoded_alike(query, encoder.encode(["query: " + t for t in TEXTS]))
    assert_encoded_alike(document, encoder.encode(["passage: " + t for t in TEXTS]))  # no "document"
    assert_encoded_alike(query, encoder.encode(TEXTS, prompt_name="query"))
    assert not np.allclose(query, document) and not np.allclose(query, encoder.encode(TEXTS))


def test_prompt_left_out_of_pooling_differs_from_prompt_as_text() -> None:
    encoder = build(include_prompt=False)
    query = encoder.encode_query(TEXTS)
    assert not np.allclose(query, encoder.encode(["query: " + t for t in TEXTS]), atol=1e-4)
    # The prompt still conditions the attention: it differs from the text alone.
    assert not np.allclose(query, encoder.encode(TEXTS), atol=1e-4)
    # Hand-computed: mean over the token vectors after "[CLS] query :" (3 tokens), normalised.
    t = encoder.transformer
    ids = t.tokenize(["query: " + TEXTS[0]])[0]
    with torch.inference_mode():
        tokens = t(t.collate(ids, torch.device("cpu")))["token_embeddings"][0, 3:]
    mean = tokens.mean(dim=0)
    np.testing.assert_allclose(query[0], (mean / mean.norm()).numpy(), atol=1e-6)
    assert t.prompt_length("query: ") == 3


def test_batching_and_order_do_not_change_prompted_vectors() -> None:
    encoder = build(include_prompt=False, modes=ALL_MODES)
    one_by_one = encoder.encode_query(TEXTS, batch_size=1)
    np.testing.assert_allclose(encoder.encode_query(TEXTS, batch_size=3), one_by_one, atol=1e-6)
    np.testing.assert_allclose(encoder.encode_query(TEXTS[::-1])[::-1], one_by_one, atol=1e-6)
    np.testing.assert_allclose(encoder.encode_query(TEXTS[0]), one_by_one[0], atol=1e-6)


def test_prompt_counts_towards_max_seq_length(caplog: pytest.LogCaptureFixture) -> None:
    encoder = build()
    encoder.max_seq_length = 9  # "[CLS] a man is playing a guitar . [SEP]" fits exactly
    encoder.encode(TEXTS[0])
    assert encoder.truncated_count == 0
    with caplog.at_level(logging.WARNING):
        encoder.encode_query(TEXTS[0])
    assert encoder.truncated_count == 1 and "truncated" in caplog.text


def test_unknown_prompt_name_is_refused_naming_the_known_ones() -> None:
    encoder = build()
    with pytest.raises(InvalidArgumentError, match=r"prompt_name='querry'.*\['classification', 'document', 'query'\]"):
        encoder.encode(TEXTS, prompt_name="querry")
    with pytest.raises(InvalidArgumentError, match="prompt_name='passage'"):
        encoder.encode_query([], prompt_name="passage")  # checked before any work, even with no texts
    with pytest.raises(InvalidArgumentError, match="default_prompt_name='nope'"):
        build(default_prompt_name="nope")
    encoder.default_prompt_name = "nope"
    with pytest.raises(InvalidArgumentError, match="default_prompt_name='nope'"):
        encoder.encode(TEXTS)
    with pytest.raises(InvalidArgumentError, match="prompt=3"):
        encoder.encode(TEXTS, prompt=3)  # type: ignore[arg-type]


def test_default_prompt_name_applies_unless_overridden(caplog: pytest.LogCaptureFixture) -> None:
    encoder = build(prompts={"query": "", "passage": "passage: "}, default_prompt_name="passage")
    plain = build(prompts={}).encode(TEXTS)
    assert_encoded_alike(encoder.encode(TEXTS), encoder.encode(TEXTS, prompt="passage: "))
    assert_encoded_alike(encoder.encode(TEXTS, prompt=""), plain)  # an explicit empty prompt wins
    assert_encoded_alike(encoder.encode_query(TEXTS), plain)  # an empty "query" prompt: no default
    with caplog.at_level(logging.WARNING):
        both = encoder.encode(TEXTS, prompt="x: ", prompt_name="passage")
    assert_encoded_alike(both, encoder.encode(TEXTS, prompt="x: "))
    assert "using prompt" in caplog.text


def test_absent_query_and_document_prompts_fall_back_to_encode() -> None:
    encoder = build(prompts={"classification": "Classify: "})
    plain = encoder.encode(TEXTS)
    assert_encoded_alike(encoder.encode_query(TEXTS), plain)
    assert_encoded_alike(encoder.encode_document(TEXTS), plain)
    encoder.default_prompt_name = "classification"
    assert_encoded_alike(encoder.encode_query(TEXTS), encoder.encode(TEXTS, prompt="Classify: "))
    assert_encoded_alike(encoder.encode_document(TEXTS, prompt_name="classification"), encoder.encode(TEXTS))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"prompts": ["query: "]}, "'prompts' must map"),
        ({"prompts": {"query": "q: "}, "default_prompt_name": "document"}, "default_prompt_name='document'"),
    ],
)
def test_bad_prompt_config_is_a_load_error(config: dict, message: str, tmp_path: Path) -> None:
    build().save(tmp_path / "m")
    (tmp_path / "m" / "config_sentence_transformers.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=message):
        SentenceEncoder.load(tmp_path / "m")


def test_pooling_config_carries_include_prompt() -> None:
    for modes in ("mean", ["max", "cls"]):
        config = Pooling(4, modes, include_prompt=False).config()
        assert config["include_prompt"] is False
        assert Pooling.from_config(config).include_prompt is False
    assert Pooling.from_config({"embedding_dimension": 4, "pooling_mode": "mean"}).include_prompt is True
    with pytest.raises(ModelLoadError, match="include_prompt='no'"):
        Pooling.from_config({"embedding_dimension": 4, "pooling_mode": "mean", "include_prompt": "no"})


@pytest.mark.slow
def test_default_model_vectors_are_the_same_through_all_three_methods(
    default_encoder: SentenceEncoder, default_model_dir: Path
) -> None:
    assert default_encoder.prompts == {} and default_encoder.default_prompt_name is None
    plain = default_encoder.encode(TEXTS)
    assert_encoded_alike(default_encoder.encode_query(TEXTS), plain)
    assert_encoded_alike(default_encoder.encode_document(TEXTS), plain)
    theirs = SentenceTransformer(str(default_model_dir), device="cpu")
    np.testing.assert_allclose(theirs.encode_query(TEXTS), plain, atol=1e-5)
    np.testing.assert_allclose(theirs.encode_document(TEXTS), plain, atol=1e-5)
