"""The layout a collection's arguments describe (``layout=``, else ``vector_name=``, ``text_field=``,
``named_vectors=``, ``sparse=``, ``first_stage_dim=``) and the encoder that fills each of its slots, checked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError
from ..layout import PointLayout, VectorSlot
from ..protocols import TextEncoder, TokenEncoder
from ..records import KEY_KEY, TEXT_KEY


def layout_of(
    given: object,
    sparse: object,
    named_vectors: Mapping[str, object],
    vector_name: str,
    text_field: str,
    distance: str,
    first_stage_dim: int | None = None,
) -> PointLayout:
    """The layout given, else the one the plain arguments describe: another tool's (``text_field``), else ours."""
    if given is not None:
        if not isinstance(given, PointLayout):
            raise InvalidArgumentError(
                f"layout={given!r:.60} must be a PointLayout, e.g. PointLayout.mcp_server_qdrant(model)."
            )
        if vector_name != "text" or text_field != TEXT_KEY or distance != "cosine":
            raise InvalidArgumentError(
                "layout= names the slots and fields itself; drop vector_name=, text_field= and distance=, or layout=."
            )
        if first_stage_dim is not None:
            raise InvalidArgumentError(
                "layout= names the slots itself; drop first_stage_dim=, or build the layout with "
                "PointLayout.ours(..., first_stage_dim=)."
            )
        if given.sparse is not None and sparse is None:
            raise InvalidArgumentError(f"sparse=None, but the layout has the sparse slot {given.sparse.name!r}.")
        return given
    if not isinstance(vector_name, str):
        raise InvalidArgumentError(f'vector_name={vector_name!r} must be a str ("": the unnamed vector).')
    if not isinstance(text_field, str) or not text_field or text_field == KEY_KEY:
        raise InvalidArgumentError(
            f"text_field={text_field!r} must name the payload field holding the text, e.g. 'page_content'."
        )
    if text_field != TEXT_KEY:
        if named_vectors or first_stage_dim is not None:
            raise InvalidArgumentError(
                "named_vectors= and first_stage_dim= add slots to a collection of sbert-qdrant's own layout only."
            )
        return PointLayout.foreign(vector_name, text_field, distance=distance)  # type: ignore[arg-type]
    slots = [VectorSlot(vector_name, distance=distance)]  # type: ignore[arg-type]
    for name, value in named_vectors.items():
        slot = _token_slot(name, value) if is_token_encoder(value) else VectorSlot(name, distance=distance)  # type: ignore[arg-type]
        slots.append(slot)
    return PointLayout.ours(tuple(slots), sparse is not None, first_stage_dim)


def is_token_encoder(value: object) -> bool:
    """Whether an encoder fills a multivector slot (one vector per token) rather than a dense one."""
    return isinstance(value, TokenEncoder) and value.multivector is True


def _token_slot(name: str, encoder: TokenEncoder) -> VectorSlot:
    """A multivector slot that re-scores candidates only (no HNSW graph), MaxSim over unit or raw token vectors."""
    return VectorSlot(name, "multivector", distance="cosine" if encoder.normalizes else "dot", index=False)


def slot_encoders(
    layout: PointLayout, encoder: object, named_vectors: Mapping[str, object]
) -> tuple[dict[str, TextEncoder], dict[str, TokenEncoder]]:
    """The encoder of every dense slot of ``layout`` (``encoder`` fills the primary, ``named_vectors`` the others)
    and of every multivector slot (a token encoder from ``named_vectors``)."""
    # a first stage is filled from its full slot's vectors, not by an encoder of its own
    slots = {slot.name: slot.kind for slot in layout.slots if slot.kind != "sparse" and slot.prefix_of is None}
    given = {layout.primary.name: ("encoder", encoder)} | {
        k: (f"named_vectors[{k!r}]", v) for k, v in named_vectors.items()
    }
    for name, (where, value) in given.items():
        if slots.get(name) == "multivector" and not is_token_encoder(value):
            raise InvalidArgumentError(
                f"{where} fills a multivector slot, so it must be a token encoder (sbert_qdrant.protocols."
                f"TokenEncoder, e.g. MultiVectorEncoder), not {type(value).__name__}."
            )
        if slots.get(name) == "dense" and (not isinstance(value, TextEncoder) or is_token_encoder(value)):
            raise InvalidArgumentError(
                f"{where} must be a SentenceEncoder or have what a collection uses (dimension, normalizes, "
                f"encode_document, encode_query: sbert_qdrant.protocols.TextEncoder), not {type(value).__name__}."
            )
    wanted = [name for name in slots if name != layout.primary.name]
    extra, missing = sorted(set(named_vectors) - set(wanted)), sorted(set(wanted) - set(named_vectors))
    if extra or missing:
        raise InvalidArgumentError(
            f"named_vectors= must give an encoder for each dense or multivector slot after the first ({wanted}); "
            f"{'unknown: ' + str(extra) if extra else 'missing: ' + str(missing)}."
        )
    dense: dict[str, Any] = {name: given[name][1] for name, kind in slots.items() if kind == "dense"}
    tokens: dict[str, Any] = {name: given[name][1] for name, kind in slots.items() if kind == "multivector"}
    return dense, tokens
