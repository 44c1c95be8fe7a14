"""A search's options as one checked value, ``SearchRequest``, read by every search path: texts, documents, a
vector, the CLI, the MCP server and the LangChain / LlamaIndex adapters.

The public search methods take the options as keyword arguments (``search_text(q, limit=5, mode="hybrid")``),
typed by ``SearchOptions`` and shown by ``help()`` through the signature ``takes_search_options`` writes from the
fields below, or one request whole (``search_text(q, request=SearchRequest(limit=5, mode="hybrid"))``: what the
CLI, the MCP server and the adapters pass). An option is added here once (a field, its check, its line in
``SearchOptions``) plus the code that acts on it.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import math
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from .errors import InvalidArgumentError
from .protocols import Reranker
from .types import FUSIONS, SCORINGS, SEARCH_MODES, Fusion, Scoring, SearchMode

if TYPE_CHECKING:  # imported where a filter or search parameters are checked: the options alone need no qdrant-client
    from qdrant_client import models

__all__ = ["Hybrid", "Mmr", "Rerank", "SearchOptions", "SearchRequest", "options_table", "takes_search_options"]

F = TypeVar("F", bound=Callable[..., Any])
#: Retrieval candidates each stage draws at least (a hybrid search's sources, MMR, late interaction).
MIN_CANDIDATES = 100
#: Hits a re-ranker re-scores when ``rerank_candidates`` is not given.
RERANK_CANDIDATES = 50
#: Matching chunks listed per document when ``chunks`` is not given.
DOCUMENT_CHUNKS = 3

#: The peers' names for options (LangChain, langchain-qdrant, LlamaIndex, qdrant-client's older calls), and the
#: option of ours each means: an unknown option named so is answered with ours.
_PEER_NAMES = {
    "k": "limit",
    "top_k": "limit",
    "similarity_top_k": "limit",
    "filter": "query_filter",
    "filters": "query_filter",
    "retrieval_mode": "mode",
    "search_type": "mode",
    "fetch_k": "candidates",
    "lambda_mult": "diversity",
    "with_vector": "with_vectors",
    "params": "search_params",
}

# How the caller spells each option (CLI flags, LangChain's names), for the errors of the request being built.
_spelling: ContextVar[Mapping[str, str]] = ContextVar("sbert_qdrant_search_spelling")


@dataclass(frozen=True)
class Hybrid:
    """``mode="hybrid"`` with its fusion as one value: ``fusion`` and, with ``rrf`` only, the ``(dense, sparse)``
    ``weights`` (``mode=Hybrid("rrf", (1.0, 2.0))`` is ``mode="hybrid", fusion="rrf", weights=(1.0, 2.0)``)."""

    fusion: Fusion = "dbsf"
    weights: Sequence[float] | None = None


@dataclass(frozen=True)
class Rerank:
    """A re-ranker with its options as one value: the hits it re-scores and its weight in the blend
    (``rerank=Rerank(cross, candidates=20, weight=0.5)`` is ``rerank=cross, rerank_candidates=20,
    rerank_weight=0.5``)."""

    model: Reranker
    candidates: int | None = None
    weight: float | None = None


@dataclass(frozen=True)
class Mmr:
    """Maximal marginal relevance with its candidates as one value (``diversity=Mmr(0.3, candidates=40)`` is
    ``diversity=0.3, candidates=40``)."""

    diversity: float
    candidates: int | None = None


#: Each grouped value: the option that takes it, and the flat options it stands for (value field -> option).
_GROUPS: dict[type, tuple[str, dict[str, str]]] = {
    Hybrid: ("mode", {"fusion": "fusion", "weights": "weights"}),
    Rerank: ("rerank", {"model": "rerank", "candidates": "rerank_candidates", "weight": "rerank_weight"}),
    Mmr: ("diversity", {"diversity": "diversity", "candidates": "candidates"}),
}


class SearchOptions(TypedDict, total=False):
    """The keyword options of ``search_text``, ``search_texts``, ``search_documents`` and ``search_by_vector``:
    ``SearchRequest``'s fields but ``limit`` (a test holds the two lists equal); ``mode``, ``rerank`` and
    ``diversity`` also take their grouped value (``Hybrid``, ``Rerank``, ``Mmr``), which ``SearchRequest.of``
    spreads into the flat options."""

    query_filter: models.Filter | Mapping[str, Any] | None
    score_threshold: float | None
    with_payload: bool
    with_vectors: bool
    offset: int
    mode: SearchMode | Hybrid
    fusion: Fusion | None
    weights: Sequence[float] | None
    candidates: int | None
    diversity: float | Mmr | None
    using: str | None
    rescore: str | None
    search_params: models.SearchParams | None
    timeout: int | None
    rerank: Reranker | Rerank | None
    rerank_candidates: int | None
    rerank_weight: float | None
    chunks: int | None
    score: Scoring | None


@dataclass(frozen=True)
class SearchRequest:
    """One search's options, each checked once when the value is made (an error names the argument as the caller
    spelled it); every search path reads this value. Options a path cannot apply are refused by that path, with
    the reason, never ignored.

    Each field's metadata carries its ``doc`` (signatures, help and docs/search.md's table are written from it)
    and, for an option the command line offers as it is, ``cli``: its argparse keywords (``flag``: its spelling
    when not ``--field-name``); ``sbert-qdrant search`` adds a flag for each."""

    limit: int = field(
        default=10, metadata={"doc": "hits returned (documents: one hit each)", "cli": {"type": int, "default": 5}}
    )
    query_filter: models.Filter | Mapping[str, Any] | None = field(
        default=None, metadata={"doc": "a `qdrant_client.models.Filter` (or its dict form) on payload fields and ids"}
    )
    score_threshold: float | None = field(
        default=None,
        metadata={
            "doc": "minimum score, in the mode's own scale (dense: cosine)",
            "cli": {"flag": "--threshold", "type": float},
        },
    )
    with_payload: bool = field(
        default=True, metadata={"doc": "return each hit's payload (texts; documents always carry theirs)"}
    )
    with_vectors: bool = field(
        default=False, metadata={"doc": "return each hit's stored dense vector in `Hit.vector` (texts)"}
    )
    offset: int = field(default=0, metadata={"doc": "best hits skipped first (pagination)", "cli": {"type": int}})
    mode: SearchMode = field(
        default="dense",
        metadata={
            "doc": "`dense` (cosine), `sparse` (BM25) or `hybrid` (both, fused by the engine)",
            "cli": {"choices": SEARCH_MODES},
        },
    )
    fusion: Fusion | None = field(
        default=None,
        metadata={
            "doc": "how `hybrid` fuses: `dbsf` (score distribution, the default) or `rrf` (rank)",
            "cli": {"choices": FUSIONS},
        },
    )
    weights: Sequence[float] | None = field(
        default=None,
        metadata={
            "doc": "`(dense, sparse)` weights of a `hybrid` search with `fusion='rrf'`",
            "cli": {"type": float, "nargs": 2, "metavar": ("DENSE", "SPARSE")},
        },
    )
    candidates: int | None = field(
        default=None,
        metadata={
            "doc": "hits each retrieval stage draws: a hybrid search's sources, MMR, late interaction, a first stage "
            "(default: texts `max(limit, 100)`, documents `max(4 * limit * chunks, 100)`; with `diversity`, twice "
            "the points read, at least 20); refused where no stage draws them",
            "cli": {"type": int},
        },
    )
    diversity: float | None = field(
        default=None,
        metadata={
            "doc": "0..1: maximal marginal relevance over the candidates (dense vectors)",
            "cli": {"type": float},
        },
    )
    using: str | None = field(
        default=None, metadata={"doc": "the dense slot searched, a name of `named_vectors` (default: the primary)"}
    )
    rescore: str | None = field(
        default=None, metadata={"doc": "a multivector slot whose MaxSim re-scores the candidates (late interaction)"}
    )
    search_params: models.SearchParams | None = field(
        default=None,
        metadata={"doc": "the dense search's `models.SearchParams`: `hnsw_ef`, `exact`, quantization rescoring"},
    )
    timeout: int | None = field(
        default=None,
        metadata={
            "doc": "whole seconds a Qdrant server may take for the search (qdrant-client's `timeout=`; default: the "
            "connection's); Qdrant Edge and local mode run in-process, with no network to wait on, and ignore it",
            "cli": {"type": int},
        },
    )
    rerank: Reranker | None = field(
        default=None, metadata={"doc": "a cross-encoder (one output) that re-scores the best `rerank_candidates`"}
    )
    rerank_candidates: int | None = field(
        default=None,
        metadata={"doc": "hits the re-ranker re-scores (default 50; needs `rerank`)", "cli": {"type": int}},
    )
    rerank_weight: float | None = field(
        default=None,
        metadata={
            "doc": "(0, 1]: blends `weight * cross + (1 - weight) * retrieval`, min-max scaled (default 1; needs "
            "`rerank`)",
            "cli": {"type": float},
        },
    )
    chunks: int | None = field(
        default=None,
        metadata={"doc": "matching chunks listed per document (default 3; documents only)", "cli": {"type": int}},
    )
    score: Scoring | None = field(
        default=None,
        metadata={
            "doc": "`max` (a document's best chunk, the default) or `sum` (documents only)",
            "cli": {"choices": SCORINGS},
        },
    )

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def of(cls, options: Mapping[str, Any], *, names: Mapping[str, str] | None = None) -> SearchRequest:
        """A request from keyword options; ``names`` maps an option to the caller's word for it (a CLI flag, an
        adapter's argument), which its errors then use."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        with _spelled(names or {}):
            if unknown:
                raise InvalidArgumentError(
                    f"{_arg(unknown[0])}= is not a search option{did_you_mean(unknown[0], known)}; the options are: "
                    f"{', '.join(sorted(known))}."
                )
            return cls(**_spread(options))

    def options(self) -> dict[str, Any]:
        """The options set away from their defaults, as keyword arguments of a search method (``limit`` too)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if not _is_default(getattr(self, f.name), f.default)
        }

    @property
    def hybrid(self) -> Hybrid | None:
        """The fusion of a hybrid search (None: another mode)."""
        return Hybrid(self.fusion or "dbsf", self.weights) if self.mode == "hybrid" else None

    @property
    def reranking(self) -> Rerank | None:
        """The re-ranker and its options (None: none)."""
        return None if self.rerank is None else Rerank(self.rerank, self.rerank_candidates, self.rerank_weight)

    @property
    def mmr(self) -> Mmr | None:
        """Maximal marginal relevance and its candidates (None: none)."""
        return None if self.diversity is None else Mmr(float(self.diversity), self.candidates)

    @property
    def depth(self) -> int:
        """Hits to retrieve before paging and re-ranking: ``limit + offset``, or the re-ranker's candidates."""
        shown = self.limit + self.offset
        return max(shown, self.rerank_candidates or RERANK_CANDIDATES) if self.rerank is not None else shown

    def refuse(self, path: str, options: Mapping[str, str]) -> None:
        """Refuse the options set that ``path`` cannot apply: ``options`` maps each to the reason."""
        for name, reason in options.items():
            value = getattr(self, name)
            if not _is_default(value, _default(name)):
                raise InvalidArgumentError(f"{_arg(name)}={value!r:.60} does not apply to {path}: {reason}.")


def _spread(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options with each grouped value (``Hybrid``, ``Rerank``, ``Mmr``) spread into the flat options it stands
    for; a flat option given beside the value that holds it is refused (it would be given twice)."""
    out = dict(options)
    for kind, (option, spread) in _GROUPS.items():
        value = out.get(option)
        if not isinstance(value, kind):
            continue
        twice = [name for name in spread.values() if name != option and out.get(name) is not None]
        if twice:
            raise InvalidArgumentError(
                f"{_arg(twice[0])}= and {_arg(option)}={kind.__name__}(...) both set {_arg(twice[0])}; give it once."
            )
        out |= {name: getattr(value, attribute) for attribute, name in spread.items()}
        if kind is Hybrid:
            out["mode"] = "hybrid"
    return out


def requested(request: SearchRequest | None, limit: int, options: Mapping[str, Any]) -> SearchRequest:
    """The request a search method was given: ``request=`` as it is, or one built from ``limit`` and the keyword
    options (not both: a request travels whole)."""
    if request is None:
        return SearchRequest.of({**options, "limit": limit})
    if not isinstance(request, SearchRequest):
        raise InvalidArgumentError(f"request= must be a SearchRequest, not {type(request).__name__}.")
    given = sorted(options) + (["limit"] if limit not in (_default("limit"), request.limit) else [])
    if given:
        raise InvalidArgumentError(
            f"{given[0]}= and request= both give search options; put it in the request "
            f"(dataclasses.replace(request, {given[0]}=...)) or pass keyword options alone."
        )
    return request


def did_you_mean(name: str, known: Collection[str]) -> str:
    """``" (did you mean X=?)"`` for a peer's name of an option (``k``: ``limit``) or a near miss of one of ``known``
    (``limt``), else ``""``."""
    if name in _PEER_NAMES:
        ours = _PEER_NAMES[name]
        what = "1 - lambda_mult" if name == "lambda_mult" else f"what the peers call {name}"
        return f" (did you mean {ours}=, {what}?)"
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}=?)" if close else ""


def _is_default(value: Any, default: Any) -> bool:
    """Whether an option holds its default (by identity or, for plain values of the default's type, equality: an
    array or a model object is never compared elementwise)."""
    return value is default or (type(value) is type(default) and value == default)


def _default(name: str) -> Any:
    return next(f.default for f in fields(SearchRequest) if f.name == name)


@contextlib.contextmanager
def _spelled(names: Mapping[str, str]) -> Iterator[None]:
    token = _spelling.set(names)
    try:
        yield
    finally:
        _spelling.reset(token)


def _arg(name: str) -> str:
    """An option as the caller spelled it."""
    return _spelling.get({}).get(name, name)


def _count(value: object, low: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= low


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _is_model(value: object, name: str) -> bool:
    """Whether ``value`` is the qdrant-client model ``name`` (qdrant-client imported only for a value to check)."""
    from qdrant_client import models

    return isinstance(value, getattr(models, name))


def _check(r: SearchRequest) -> None:
    """Each option on its own, then the options that depend on one another."""
    if not _count(r.limit, 1):
        raise InvalidArgumentError(f"{_arg('limit')}={r.limit!r} must be a positive integer.")
    if not _count(r.offset, 0):
        raise InvalidArgumentError(f"{_arg('offset')}={r.offset!r} must be a non-negative integer: hits to skip.")
    if (
        r.query_filter is not None
        and not isinstance(r.query_filter, Mapping)
        and not _is_model(r.query_filter, "Filter")
    ):
        raise InvalidArgumentError(
            f"{_arg('query_filter')} must be a qdrant_client.models.Filter or its dict form, not "
            f"{type(r.query_filter).__name__}."
        )
    if r.score_threshold is not None and not _number(r.score_threshold):
        raise InvalidArgumentError(f"{_arg('score_threshold')}={r.score_threshold!r} must be a finite number.")
    for name in ("with_payload", "with_vectors"):
        if not isinstance(getattr(r, name), bool):
            raise InvalidArgumentError(f"{_arg(name)}={getattr(r, name)!r} must be True or False.")
    _check_modes(r)
    if r.candidates is not None and not _count(r.candidates, r.limit + r.offset):
        raise InvalidArgumentError(
            f"{_arg('candidates')}={r.candidates!r} must be an integer >= {_arg('limit')} + {_arg('offset')} "
            f"({r.limit + r.offset})."
        )
    if r.diversity is not None and not (_number(r.diversity) and 0 <= r.diversity <= 1):
        raise InvalidArgumentError(
            f"{_arg('diversity')}={r.diversity!r} must be between 0 (relevance only) and 1 (diversity only), or None."
        )
    for name, what in (("using", "a dense vector slot"), ("rescore", "a multivector slot")):
        if getattr(r, name) is not None and not (isinstance(getattr(r, name), str) and getattr(r, name)):
            raise InvalidArgumentError(f"{_arg(name)}={getattr(r, name)!r} must name {what} of the collection.")
    if r.rescore is not None and r.diversity is not None:
        raise InvalidArgumentError(
            f"{_arg('rescore')}= cannot be combined with {_arg('diversity')}= (MMR orders the final hits itself); "
            "drop one of them."
        )
    if r.search_params is not None and not _is_model(r.search_params, "SearchParams"):
        raise InvalidArgumentError(
            f"{_arg('search_params')}={r.search_params!r:.60} must be a qdrant_client.models.SearchParams, e.g. "
            "SearchParams(quantization=QuantizationSearchParams(rescore=True, oversampling=2.0)), or None."
        )
    if r.timeout is not None and not _count(r.timeout, 1):
        raise InvalidArgumentError(
            f"{_arg('timeout')}={r.timeout!r} must be a positive whole number of seconds (Qdrant's unit), e.g. 10, "
            "or None for the connection's own timeout."
        )
    if r.mode == "sparse" and r.diversity is None:
        r.refuse("mode='sparse'", {"search_params": "it runs no dense search", "using": "it searches BM25 only"})
    _check_rerank(r)
    if r.chunks is not None and not _count(r.chunks, 1):
        raise InvalidArgumentError(f"{_arg('chunks')}={r.chunks!r} must be a positive integer.")
    if r.score is not None and r.score not in SCORINGS:
        raise InvalidArgumentError(f"{_arg('score')}={r.score!r} must be one of {SCORINGS}.")


def _check_modes(r: SearchRequest) -> None:
    if r.mode not in SEARCH_MODES:
        raise InvalidArgumentError(f"{_arg('mode')}={r.mode!r} must be one of {SEARCH_MODES}.")
    if r.fusion is not None and r.fusion not in FUSIONS:
        raise InvalidArgumentError(f"{_arg('fusion')}={r.fusion!r} must be one of {FUSIONS}.")
    if r.fusion is not None and r.mode != "hybrid":
        raise InvalidArgumentError(
            f"{_arg('fusion')}={r.fusion!r} applies to {_arg('mode')}='hybrid' only (got {r.mode!r}); drop it or "
            "search hybrid."
        )
    if r.weights is None:
        return
    if r.fusion != "rrf":
        raise InvalidArgumentError(
            f"{_arg('weights')}={r.weights!r} apply to {_arg('mode')}='hybrid' with {_arg('fusion')}='rrf' only "
            f"(got mode={r.mode!r}, fusion={r.fusion!r}); drop them or use those."
        )
    values = list(r.weights) if isinstance(r.weights, Sequence) and not isinstance(r.weights, str) else []
    if len(values) != 2 or not all(_number(w) and w >= 0 for w in values) or sum(values) <= 0:
        raise InvalidArgumentError(
            f"{_arg('weights')}={r.weights!r} must be two non-negative numbers (dense, sparse), not both 0, e.g. "
            "(1.0, 2.0)."
        )


def _check_rerank(r: SearchRequest) -> None:
    if r.rerank is None:
        for name in ("rerank_candidates", "rerank_weight"):
            if getattr(r, name) is not None:
                raise InvalidArgumentError(
                    f"{_arg(name)}={getattr(r, name)!r} needs {_arg('rerank')}= (a cross-encoder); without one it "
                    "would be ignored: pass a re-ranker or drop it."
                )
        return
    if not isinstance(r.rerank, Reranker) or r.rerank.num_labels != 1:
        raise InvalidArgumentError(
            f"{_arg('rerank')}= must be a CrossEncoder with one output (a relevance score) or another Reranker "
            f"(sbert_qdrant.protocols), not {r.rerank!r:.80}; load one with CrossEncoder.load(folder) or train one "
            "(sbert-qdrant train --objective cross-encoder-binary)."
        )
    if getattr(r.rerank, "head_trained", True) is False:
        warnings.warn(
            f"{_arg('rerank')}= is a cross-encoder whose head is still the random one CrossEncoder.from_transformer "
            "made: its scores are noise. Train it first (sbert-qdrant train --objective cross-encoder-binary) or load "
            "a trained one.",
            UserWarning,
            stacklevel=4,
        )
    if r.rerank_candidates is not None and not _count(r.rerank_candidates, 1):
        raise InvalidArgumentError(f"{_arg('rerank_candidates')}={r.rerank_candidates!r} must be a positive integer.")
    weight = r.rerank_weight
    if weight is not None and not (_number(weight) and 0 < weight <= 1):
        raise InvalidArgumentError(
            f"{_arg('rerank_weight')}={weight!r} must be a number in (0, 1]: 1 orders by the re-ranker alone, less "
            "blends its score with the retrieval score."
        )


def takes_search_options(method: F) -> F:
    """Give a search method taking ``**options: Unpack[SearchOptions]`` the signature and docs of every option, so
    that ``help()`` and ``inspect.signature`` list them (type checkers read ``SearchOptions``)."""
    signature = inspect.signature(method)
    own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    taken = {p.name for p in own}
    extra = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=f.default,
            annotation=SearchOptions.__annotations__.get(f.name, f.type),
        )
        for f in fields(SearchRequest)
        if f.name not in taken
    ]
    method.__signature__ = signature.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
    lines = [f"    {f.name}: {f.metadata['doc']}" for f in fields(SearchRequest) if f.name not in taken]
    method.__doc__ = f"{inspect.cleandoc(method.__doc__ or '')}\n\nSearch options (SearchRequest):\n" + "\n".join(lines)
    return method


def cli_options() -> list[tuple[str, str, dict[str, Any]]]:
    """The options the command line offers as they are: (field, flag, argparse keywords with the help and the
    default)."""
    out = []
    for f in fields(SearchRequest):
        if "cli" not in f.metadata:
            continue
        keywords = {"default": f.default, "help": f.metadata["doc"].replace("`", "").replace("%", "%%")}
        keywords |= f.metadata["cli"]
        if "metavar" not in keywords and keywords.get("type") in (int, float):
            keywords["metavar"] = "N" if keywords["type"] is int else "X"
        out.append((f.name, keywords.pop("flag", "--" + f.name.replace("_", "-")), keywords))
    return out


def options_table() -> str:
    """The options as a Markdown table (docs/search.md holds it; a test keeps the two equal)."""
    rows = ["| option | default | what |", "|---|---|---|"]
    for f in fields(SearchRequest):
        default = "" if f.default is MISSING else repr(f.default)
        rows.append(f"| `{f.name}` | `{default}` | {f.metadata['doc']} |")
    return "\n".join(rows)
