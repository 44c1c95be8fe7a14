"""One search request: every option accepted by every path that documents it (texts, documents, a vector, the CLI,
LangChain, LlamaIndex), each refused option with its reason and the caller's name for it, and the signatures,
types and docs table held to ``SearchRequest``."""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path
from typing import Any, get_type_hints

import pytest
import torch
from qdrant_client import QdrantClient, models

from sbert_qdrant import (
    CrossEncoder,
    Hybrid,
    InvalidArgumentError,
    Mmr,
    MultiVectorEncoder,
    Rerank,
    SearchOptions,
    SearchRequest,
    TextCollection,
    testing,
)
from sbert_qdrant.cli import main
from sbert_qdrant.encoder.layers import Dense
from sbert_qdrant.search_request import options_table
from sbert_qdrant.store import ClientStore

TEXTS = ["How do I learn Python?", "Why is the sky blue?", "Best pizza in Naples", "Learning to code in Python"]
ROOT = Path(__file__).resolve().parents[1]


def _tokens() -> MultiVectorEncoder:
    transformer = testing.tiny_transformer()
    return MultiVectorEncoder(
        transformer, Dense(transformer.dimension, 16, bias=False), True, frozenset(), "tiny", 1, "cpu"
    )


@pytest.fixture(scope="module")
def cross(tmp_path_factory: pytest.TempPathFactory) -> CrossEncoder:
    folder = tmp_path_factory.mktemp("tiny-cross")
    testing.tiny_encoder().save(folder)
    return CrossEncoder.from_transformer(folder, seed=3)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("edge")


@pytest.fixture(scope="module")
def coll(folder: Path) -> Any:
    """Texts in a collection with a second dense slot and a token slot."""
    named = {"cls": testing.tiny_encoder(seed=2), "tokens": _tokens()}
    collection = TextCollection("every", testing.tiny_encoder(), location=folder, named_vectors=named)
    collection.upsert_texts(TEXTS, ids=["a", "b", "c", "d"], payloads=[{"n": i} for i in range(4)])
    yield collection
    collection.close()


@pytest.fixture(scope="module")
def docs(folder: Path) -> Any:
    """Texts and one-chunk documents of the same words in one collection with a token slot (documents are chunked
    by one dense slot's tokenizer)."""
    collection = TextCollection("docs", testing.tiny_encoder(), location=folder, named_vectors={"tokens": _tokens()})
    collection.upsert_texts(TEXTS, ids=["a", "b", "c", "d"], payloads=[{"n": i} for i in range(4)])
    collection.upsert_documents(TEXTS, ids=["da", "db", "dc", "dd"], payloads=[{"n": i} for i in range(4)])
    yield collection
    collection.close()


def _values(cross: CrossEncoder) -> dict[str, dict[str, Any]]:
    """A valid value away from the default for every option, with the options it needs."""
    return {
        "limit": {"limit": 3},
        "query_filter": {
            "query_filter": models.Filter(must=[models.FieldCondition(key="n", range=models.Range(lt=3))])
        },
        "score_threshold": {"score_threshold": -1.0},
        "with_payload": {"with_payload": False},
        "with_vectors": {"with_vectors": True},
        "offset": {"offset": 1},
        "mode": {"mode": "hybrid"},
        "fusion": {"mode": "hybrid", "fusion": "rrf"},
        "weights": {"mode": "hybrid", "fusion": "rrf", "weights": (1.0, 2.0)},
        "candidates": {"mode": "hybrid", "candidates": 20},  # where a stage draws them (plain dense: refused)
        "diversity": {"diversity": 0.3},
        "using": {"using": "cls"},
        "rescore": {"rescore": "tokens"},
        "search_params": {"search_params": models.SearchParams(exact=True)},
        "timeout": {"timeout": 5},  # accepted and ignored by the in-process engines (Edge here)
        "rerank": {"rerank": cross},
        "rerank_candidates": {"rerank": cross, "rerank_candidates": 3},
        "rerank_weight": {"rerank": cross, "rerank_weight": 0.5},
        "chunks": {"chunks": 1},
        "score": {"score": "sum"},
    }


#: Options a path refuses, with a word of its reason.
REFUSED = {
    "text": {"chunks": "search_documents", "score": "search_documents"},
    "document": {"with_vectors": "no vector", "with_payload": "chunks' payload"},
    "vector": {
        "chunks": "search_documents",
        "score": "search_documents",
        "mode": "densely",
        "fusion": "densely",
        "weights": "densely",
        "diversity": "MMR",
        "rescore": "tokens",
        "rerank": "query's text",
        "rerank_candidates": "query's text",
        "rerank_weight": "query's text",
        "candidates": "densely",
    },
}


def test_every_option_has_a_test_value_and_one_spelling(cross: CrossEncoder) -> None:
    fields = list(SearchRequest.__dataclass_fields__)
    assert set(_values(cross)) == set(fields)
    names = {"models": models}  # imported by the module for type checkers and checks only: no qdrant-client to parse
    hints = get_type_hints(SearchRequest, localns=names)
    grouped = {"mode": Hybrid, "diversity": Mmr, "rerank": Rerank}  # the keyword form also takes the grouped value
    wanted = {k: v | grouped[k] if k in grouped else v for k, v in hints.items() if k != "limit"}
    assert get_type_hints(SearchOptions, localns=names) == wanted
    for method in ("search_text", "search_texts", "search_documents", "search_by_vector", "search_similar"):
        params = inspect.signature(getattr(TextCollection, method)).parameters
        assert set(fields) <= set(params), method
        assert all(params[f].default == SearchRequest.__dataclass_fields__[f].default for f in fields), method
        assert "Search options (SearchRequest)" in (getattr(TextCollection, method).__doc__ or "")
    assert options_table() in (ROOT / "docs" / "search.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("option", list(SearchRequest.__dataclass_fields__))
def test_every_option_on_every_collection_path(coll: Any, docs: Any, cross: CrossEncoder, option: str) -> None:
    options = _values(cross)[option]
    in_docs = {**options, "using": "text"} if option == "using" else options  # its one dense slot, by name
    calls = {
        "text": lambda: coll.search_text("learning Python", **options),
        "texts": lambda: coll.search_texts(["learning Python", "sky"], **options)[0],
        "document": lambda: docs.search_documents("learning Python", **in_docs),
        "vector": lambda: coll.search_by_vector(coll.encoder.encode_query(["learning Python"])[0], **options),
    }
    for path, call in calls.items():
        refused = REFUSED.get("text" if path == "texts" else path, {})
        if option in refused:
            first = next(name for name in options if name in refused)  # fusion's mode, rerank_weight's rerank
            with pytest.raises(InvalidArgumentError, match=f"{first}=.* does not apply to .*{refused[first]}"):
                call()
            continue
        found = call()
        assert isinstance(found, list) and 1 <= len(found) <= options.get("limit", 10), (path, option)
    if option == "with_vectors":
        assert all(h.vector is not None for h in coll.search_text("sky", **options))
    if option == "offset":
        assert coll.search_text("sky", offset=1)[0].id == coll.search_text("sky")[1].id
        assert docs.search_documents("sky", offset=1)[0].id == docs.search_documents("sky")[1].id


def test_documents_rescore_as_texts_do_on_one_chunk_documents(docs: Any) -> None:
    for mode in ("dense", "hybrid"):
        texts = docs.search_text("learning Python", mode=mode, rescore="tokens", candidates=20)
        documents = docs.search_documents("learning Python", mode=mode, rescore="tokens", candidates=20, chunks=1)
        assert ["d" + h.id for h in texts] == [h.id for h in documents]
        assert [h.score for h in texts] == pytest.approx([h.score for h in documents], rel=1e-4)
        plain = docs.search_documents("learning Python", mode=mode, chunks=1)
        assert [h.score for h in plain] != pytest.approx([h.score for h in documents], rel=1e-4)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rerank_weight": 0.5}, "rerank_weight=0.5 needs rerank="),
        ({"rerank_candidates": 5}, "rerank_candidates=5 needs rerank="),
        ({"fusion": "rrf"}, "fusion='rrf' applies to mode='hybrid' only"),
        ({"mode": "hybrid", "weights": (1, 1)}, "weights=.* apply to mode='hybrid' with fusion='rrf'"),
        ({"mode": "sparse", "search_params": models.SearchParams(exact=True)}, "search_params=.*mode='sparse'"),
        ({"mode": "sparse", "using": "cls"}, "using='cls' does not apply to mode='sparse'"),
        ({"rescore": "tokens", "diversity": 0.5}, "rescore= cannot be combined with diversity="),
        ({"candidates": 2, "limit": 3}, "candidates=2 must be an integer >= limit"),
        ({"limit": 0}, "limit=0 must be a positive integer"),
        ({"offset": -1}, "offset=-1"),
        ({"diversity": 2}, "diversity=2 must be between 0"),
        ({"score": "avg"}, "score='avg' must be one of"),
        ({"chunks": 0}, "chunks=0 must be a positive integer"),
        ({"with_payload": "yes"}, "with_payload='yes' must be True or False"),
        ({"mode": "semantic"}, "mode='semantic' must be one of"),
        ({"fliter": None}, "fliter= is not a search option"),
        ({"timeout": 0}, "timeout=0 must be a positive whole number of seconds"),
        ({"timeout": 2.5}, "timeout=2.5 must be a positive whole number of seconds"),
        ({"timeout": True}, "timeout=True must be a positive whole number of seconds"),
    ],
)
def test_each_refused_option_names_itself(coll: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        SearchRequest.of(options)
    with pytest.raises(InvalidArgumentError, match=message):
        coll.search_text("sky", **options)


def test_the_collection_names_the_argument_of_a_missing_slot(coll: Any, docs: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="rescore='text' names no multivector slot"):
        docs.search_documents("sky", rescore="text")
    with pytest.raises(InvalidArgumentError, match="using='tokens' names no dense slot"):
        coll.search_text("sky", using="tokens")
    with pytest.raises(InvalidArgumentError, match="must be a CrossEncoder with one output"):
        coll.search_text("sky", rerank=coll.encoder)


def test_errors_use_the_callers_names() -> None:
    flags = {"rerank_weight": "--rerank-weight", "limit": "--limit"}
    with pytest.raises(InvalidArgumentError, match=r"--rerank-weight=0\.5 needs rerank="):
        SearchRequest.of({"rerank_weight": 0.5}, names=flags)
    with pytest.raises(InvalidArgumentError, match="--limit=0 must"):
        SearchRequest.of({"limit": 0}, names=flags)
    with pytest.raises(InvalidArgumentError, match=r"^limit=0 must"):
        SearchRequest(limit=0)  # the names belong to the call that gave them
    assert SearchRequest.of({"limit": 5, "mode": "dense"}).options() == {"limit": 5}


def test_the_cli_takes_the_options_and_refuses_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")

    def engine(name: str = "c") -> list[str]:
        return ["--location", str(tmp_path / "q"), "--collection", name, "--device", "cpu", "--no-progress"]

    assert main(["index", str(source), *engine()]) == 0
    assert main(["index", str(source), "--documents", *engine("d")]) == 0
    capsys.readouterr()
    search = ["search", "learning Python", "--json", "--offset", "1", "--limit", "2", "--timeout", "5"]
    hybrid = ["--mode", "hybrid", "--fusion", "rrf", "--weights", "1", "2", "--candidates", "20"]
    assert main([*search, *hybrid, *engine()]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main([*search, "--documents", "--chunks", "1", "--score", "sum", *engine("d")]) == 0
    assert all(len(json.loads(line)["chunks"]) == 1 for line in capsys.readouterr().out.splitlines())
    for flags, message in [
        (["--rerank-weight", "0.5"], "--rerank-weight=0.5 needs --rerank="),
        (["--fusion", "rrf"], "--fusion='rrf' applies to --mode='hybrid' only"),
        (["--chunks", "2"], "--chunks and --score apply to one hit per document"),
        (["--timeout", "0"], "--timeout=0 must be a positive whole number of seconds"),
        (["--rerank", str(tmp_path / "no-model"), "--limit", "0"], "--limit=0 must be a positive integer"),
    ]:
        assert main(["search", "sky", *flags, *engine()]) == 2
        assert message in capsys.readouterr().err


def test_langchain_and_llama_index_take_every_option(coll: Any, docs: Any, cross: CrossEncoder) -> None:
    pytest.importorskip("langchain_core")
    from sbert_qdrant.integrations.langchain import SbertDocumentRetriever, SbertQdrantVectorStore

    store = SbertQdrantVectorStore(coll, retrieval_mode="hybrid", rerank=cross, rerank_weight=0.5)
    assert store.search_options == {"mode": "hybrid", "rerank": cross, "rerank_weight": 0.5}
    for option, options in _values(cross).items():
        kwargs = {k: v for k, v in options.items() if k not in ("limit", "query_filter")}
        if option in REFUSED["text"]:
            with pytest.raises(InvalidArgumentError, match="does not apply to a text search"):
                store.similarity_search("learning Python", k=2, **kwargs)
        else:
            assert 1 <= len(store.similarity_search("learning Python", k=2, **kwargs)) <= 2, option
        if option not in REFUSED["document"]:
            kwargs = {**kwargs, "using": "text"} if option == "using" else kwargs
            retriever = SbertDocumentRetriever(collection=docs, k=2, search_kwargs=kwargs)
            assert 1 <= len(retriever.invoke("learning Python")) <= 2, option
    with pytest.raises(InvalidArgumentError, match="mode= and retrieval_mode= name the same search option"):
        store.similarity_search("x", mode="dense", retrieval_mode="dense")
    with pytest.raises(InvalidArgumentError, match="fetch_k=1 must be an integer >= k"):
        SbertDocumentRetriever(collection=docs, k=2, search_kwargs={"fetch_k": 1}).invoke("x")
    pytest.importorskip("llama_index.core")
    from sbert_qdrant.integrations.llama_index import SbertDocumentRetriever as LlamaRetriever

    assert len(LlamaRetriever(docs, 2, {"rescore": "tokens", "chunks": 1}).retrieve("learning Python")) == 2
    with pytest.raises(InvalidArgumentError, match="similarity_top_k=0 must be a positive integer"):
        LlamaRetriever(docs, 0)
    with pytest.raises(InvalidArgumentError, match=r"rerank_weight=0\.5 needs rerank="):
        LlamaRetriever(docs, 2, {"rerank_weight": 0.5})


def test_an_untrained_reranker_is_named(cross: CrossEncoder) -> None:
    assert not cross.head_trained
    with pytest.warns(UserWarning, match="head is still the random one"):
        SearchRequest(rerank=cross)
    trained = CrossEncoder.from_transformer(cross.transformer.model.name_or_path or None, seed=4)
    with torch.no_grad():
        trained.transformer.model.classifier.weight.mul_(2)  # any step of training moves the head
    assert trained.head_trained
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SearchRequest(rerank=trained)


def test_a_request_travels_whole_and_options_that_go_together_are_one_value(coll: Any, cross: CrossEncoder) -> None:
    """``request=`` takes a SearchRequest as it is (never with keyword options beside it); ``Hybrid``, ``Rerank``
    and ``Mmr`` are the grouped spellings of the flat options, the same search either way."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the random head's warning
        options = {"mode": "hybrid", "fusion": "rrf", "weights": (1.0, 2.0), "rerank": cross, "limit": 2}
        flat = SearchRequest.of(
            {**options, "rerank_candidates": 3, "rerank_weight": 0.5, "diversity": 0.3, "candidates": 4}
        )
        together = {"mode": Hybrid("rrf", (1.0, 2.0)), "rerank": Rerank(cross, 3, 0.5), "diversity": Mmr(0.3, 4)}
        grouped = SearchRequest.of({**together, "limit": 2})
    assert grouped == flat
    assert flat.hybrid == Hybrid("rrf", (1.0, 2.0)) and flat.reranking == Rerank(cross, 3, 0.5)
    assert flat.mmr == Mmr(0.3, 4) and SearchRequest().hybrid is None and SearchRequest().reranking is None
    request = SearchRequest(limit=2, mode="hybrid", fusion="rrf")
    assert coll.search_text("sky", request=request) == coll.search_text("sky", 2, mode=Hybrid("rrf"))
    with pytest.raises(InvalidArgumentError, match=r"fusion= and mode=Hybrid\(...\) both set fusion"):
        coll.search_text("sky", mode=Hybrid("rrf"), fusion="rrf")
    with pytest.raises(InvalidArgumentError, match="mode= and request= both give search options"):
        coll.search_text("sky", request=request, mode="dense")
    with pytest.raises(InvalidArgumentError, match="limit= and request= both give search options"):
        coll.search_text("sky", 5, request=request)
    with pytest.raises(InvalidArgumentError, match="request= must be a SearchRequest"):
        coll.search_text("sky", request={"limit": 2})


class _ServerLike:
    """A qdrant-client that the store takes for a server's (no local mode behind it: the engine groups and
    diversifies itself), each call's ``timeout=`` recorded by method."""

    _client = None

    def __init__(self, inner: QdrantClient) -> None:
        self.inner = inner
        self.timeouts: dict[str, list[Any]] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.timeouts.setdefault(name, []).append(kwargs.get("timeout", "absent"))
            return method(*args, **kwargs)

        return call


@pytest.fixture()
def by_client() -> Any:
    """The same texts and documents in qdrant-client's local mode, and behind a client taken for a server's."""
    spy = _ServerLike(QdrantClient(":memory:"))
    local = TextCollection("t", testing.tiny_encoder(), client=QdrantClient(":memory:"))
    server = TextCollection("t", testing.tiny_encoder(), store=ClientStore(spy, close_client=False))  # type: ignore[arg-type]
    for c in (local, server):
        c.upsert_texts(TEXTS, ids=["a", "b", "c", "d"])
        c.upsert_documents(TEXTS, ids=["da", "db", "dc", "dd"])
    yield local, server, spy
    local.close()
    server.close()


def test_a_servers_grouped_document_search_takes_the_dense_search_params(by_client: Any) -> None:
    """query_points_groups names QueryRequest's ``params`` ``search_params``: a server's dense document search
    passes them so (it failed with "Unknown arguments: ['params']")."""
    local, server, _ = by_client
    exact = models.SearchParams(exact=True)
    for options in ({}, {"search_params": exact}, {"mode": "hybrid"}):
        assert server.search_documents("sky", **options) == local.search_documents("sky", **options)


def test_timeout_reaches_qdrant_client_and_every_engine_answers_alike(by_client: Any, coll: Any, docs: Any) -> None:
    """``timeout=`` is passed to qdrant-client's search calls (a server's, and its grouped one for documents);
    local mode and Qdrant Edge, in-process, give the same hits with it as without."""
    local, server, spy = by_client
    vector = coll.encoder.encode_query(["learning Python"])[0]
    for c in (local, server, coll):
        assert c.search_text("learning Python", timeout=7) == c.search_text("learning Python")
        assert c.search_by_vector(vector, limit=2, timeout=7) == c.search_by_vector(vector, limit=2)
    for c in (local, server, docs):
        assert c.search_documents("sky", timeout=7) == c.search_documents("sky")
    assert spy.timeouts["query_batch_points"] == [7, None, 7, None]
    assert spy.timeouts["query_points_groups"] == [7, None]
