"""mcp-server-qdrant's ``FILTERABLE_FIELDS``, read from its 0.8 source and written here anew: each field a
``qdrant-find`` argument, turned into a Qdrant condition on the caller's fields where the layout keeps them, with a
payload index (its collection layout itself is ``PointLayout.mcp_server_qdrant``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

if TYPE_CHECKING:
    from qdrant_client import models

    from ...layout import PointLayout

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
                f"field {self.name!r} cannot be a tool argument (letters, digits and _ only); "
                "rename the metadata field, or leave its condition out to index it only."
            )
        if self.condition is not None and self.condition not in _CONDITIONS[self.field_type]:
            raise ValueError(
                f"field {self.name!r} is {self.field_type} and cannot take condition "
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


def field_filter(
    fields: dict[str, FilterableField], values: dict[str, Any], layout: PointLayout
) -> models.Filter | None:
    """The Qdrant filter of the field arguments an agent gave (None values left out), on ``layout``'s keys."""
    from qdrant_client import models

    must: list[models.Condition] = []
    must_not: list[models.Condition] = []
    for name, value in values.items():
        if value is None:
            continue
        field = fields[name]
        key = layout.field_key(name)
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
