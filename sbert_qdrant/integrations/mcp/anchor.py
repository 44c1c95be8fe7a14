"""mcp-server-qdrant's conventions, read from its 0.8 source and written here anew: its collection layout (the vector
``fast-<model>``, the text under ``document``, the metadata under ``metadata``) and its ``FILTERABLE_FIELDS`` (each
field a ``qdrant-find`` argument, turned into a Qdrant condition on the metadata, with a payload index)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

from ...records import TEXT_KEY

if TYPE_CHECKING:
    from qdrant_client import models

    from ...records import Hit

#: Where mcp-server-qdrant keeps a memory's text and its metadata.
ANCHOR_TEXT_FIELD = "document"
ANCHOR_METADATA_FIELD = "metadata"

FieldType = Literal["keyword", "integer", "float", "boolean"]
Condition = Literal["==", "!=", ">", ">=", "<", "<=", "any", "except"]

#: The conditions each field type takes (as mcp-server-qdrant accepts them).
_CONDITIONS: dict[str, frozenset[str]] = {
    "keyword": frozenset({"==", "!=", "any", "except"}),
    "integer": frozenset({"==", "!=", ">", ">=", "<", "<=", "any", "except"}),
    "float": frozenset({">", ">=", "<", "<="}),
    "boolean": frozenset({"==", "!="}),
}
_PYTHON_TYPES: dict[str, type] = {"keyword": str, "integer": int, "float": float, "boolean": bool}
_RANGES = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}


class FilterableField(BaseModel):
    """One entry of ``FILTERABLE_FIELDS`` (a JSON list): a metadata field an agent may filter ``qdrant-find`` on."""

    name: str = Field(min_length=1, description="the metadata field")
    description: str = Field(description="what the field holds, shown to the agent as the argument's description")
    field_type: FieldType
    condition: Condition | None = Field(
        default=None, description="how the argument's value is compared (None: indexed only, no argument)"
    )
    required: bool = False

    @model_validator(mode="after")
    def _condition_fits_type(self) -> FilterableField:
        if self.condition is not None and not self.name.isidentifier():
            raise ValueError(
                f"FILTERABLE_FIELDS: field {self.name!r} cannot be a tool argument (letters, digits and _ only); "
                "rename the metadata field, or leave its condition out to index it only."
            )
        if self.condition is not None and self.condition not in _CONDITIONS[self.field_type]:
            raise ValueError(
                f"FILTERABLE_FIELDS: field {self.name!r} is {self.field_type} and cannot take condition "
                f"{self.condition!r}; a {self.field_type} field takes {sorted(_CONDITIONS[self.field_type])}."
            )
        return self

    @property
    def python_type(self) -> Any:
        """The argument's type: a list of values for ``any`` / ``except``."""
        single = _PYTHON_TYPES[self.field_type]
        return list[single] if self.condition in ("any", "except") else single  # type: ignore[valid-type]

    def index_schema(self) -> models.PayloadSchemaType:
        """The payload index mcp-server-qdrant creates for the field."""
        from qdrant_client import models

        return {
            "keyword": models.PayloadSchemaType.KEYWORD,
            "integer": models.PayloadSchemaType.INTEGER,
            "float": models.PayloadSchemaType.FLOAT,
            "boolean": models.PayloadSchemaType.BOOL,
        }[self.field_type]


@dataclass(frozen=True)
class Layout:
    """How a collection keeps its points: the dense vector's name, the text's payload field, and where the caller's
    metadata sits (``metadata_field``: nested under it, mcp-server-qdrant's way; None: beside the text, ours)."""

    vector_name: str
    text_field: str = TEXT_KEY
    metadata_field: str | None = None

    @property
    def anchor(self) -> bool:
        """mcp-server-qdrant's layout: writable here, its metadata nested under ``metadata``."""
        return self.text_field == ANCHOR_TEXT_FIELD and self.metadata_field == ANCHOR_METADATA_FIELD

    def metadata_of(self, hits: list[Hit]) -> list[Hit]:
        """The hits, each payload the metadata as it was stored (mcp-server-qdrant's: what sits under ``metadata``)."""
        if self.metadata_field is None:
            return hits
        nested = [h.payload.get(self.metadata_field) for h in hits]
        return [replace(h, payload=m if isinstance(m, dict) else {}) for h, m in zip(hits, nested, strict=True)]

    def key(self, field: str) -> str:
        """The payload key of a metadata field."""
        return field if self.metadata_field is None else f"{self.metadata_field}.{field}"


def anchor_vector_name(model: str) -> str:
    """mcp-server-qdrant's vector name for a model: ``fast-`` and the model's last path part in lower case."""
    return "fast-" + model.rstrip("/").split("/")[-1].lower()


def field_filter(fields: dict[str, FilterableField], values: dict[str, Any], layout: Layout) -> models.Filter | None:
    """The Qdrant filter of the field arguments an agent gave (None values left out), on ``layout``'s keys."""
    from qdrant_client import models

    must: list[models.Condition] = []
    must_not: list[models.Condition] = []
    for name, value in values.items():
        if value is None:
            continue
        field = fields[name]
        key = layout.key(name)
        if field.condition in _RANGES:
            must.append(models.FieldCondition(key=key, range=models.Range(**{_RANGES[field.condition]: value})))
        elif field.condition == "any":
            must.append(models.FieldCondition(key=key, match=models.MatchAny(any=value)))
        elif field.condition == "except":
            must.append(models.FieldCondition(key=key, match=models.MatchExcept(**{"except": value})))
        else:
            (must if field.condition == "==" else must_not).append(
                models.FieldCondition(key=key, match=models.MatchValue(value=value))
            )
    return models.Filter(must=must, must_not=must_not) if must or must_not else None


def both(first: models.Filter | None, second: models.Filter | None) -> models.Filter | None:
    """Points that match both filters."""
    from qdrant_client import models

    if first is None or second is None:
        return first or second
    return models.Filter(must=[first, second])
