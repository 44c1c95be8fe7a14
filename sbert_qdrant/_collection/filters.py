"""Query filters as the caller writes them, made ready for any engine: ids in ``HasIdCondition`` are the caller's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic
from qdrant_client import models

from ..errors import InvalidArgumentError, InvalidInputError
from ..records import check_id, point_id


def engine_filter(query_filter: models.Filter | Mapping[str, Any] | None) -> models.Filter | None:
    """The filter to send: a ``models.Filter`` or its dict form, with the caller's ids turned into point ids."""
    if query_filter is None:
        return None
    if isinstance(query_filter, Mapping):
        try:
            query_filter = models.Filter.model_validate(dict(query_filter))
        except pydantic.ValidationError as exc:
            raise InvalidArgumentError(
                f"query_filter={dict(query_filter)!r:.120} is not a Qdrant filter ({exc.error_count()} errors, first: "
                f"{exc.errors()[0]['msg']}); build it with qdrant_client.models.Filter."
            ) from None
    if not isinstance(query_filter, models.Filter):
        raise InvalidArgumentError(
            f"query_filter must be a qdrant_client.models.Filter or its dict form, not {type(query_filter).__name__}."
        )
    return _translate(query_filter)


def _translate(query_filter: models.Filter) -> models.Filter:
    def each(conditions: Any) -> list[Any] | None:
        if conditions is None:
            return None
        return [_condition(c) for c in (conditions if isinstance(conditions, list) else [conditions])]

    update: dict[str, Any] = {"must": each(query_filter.must), "should": each(query_filter.should)}
    update["must_not"] = each(query_filter.must_not)
    if query_filter.min_should is not None:
        update["min_should"] = query_filter.min_should.model_copy(
            update={"conditions": each(query_filter.min_should.conditions)}
        )
    return query_filter.model_copy(update=update)


def _condition(condition: Any) -> Any:
    if isinstance(condition, models.HasIdCondition):
        ids: list[models.ExtendedPointId] = []
        for i, value in enumerate(condition.has_id):
            try:
                ids.append(point_id(check_id(value, f"HasIdCondition.has_id[{i}]")))
            except InvalidInputError as exc:
                raise InvalidArgumentError(str(exc)) from None
        return models.HasIdCondition(has_id=ids)
    if isinstance(condition, models.Filter):
        return _translate(condition)
    if isinstance(condition, models.NestedCondition):
        nested = condition.nested.model_copy(update={"filter": _translate(condition.nested.filter)})
        return condition.model_copy(update={"nested": nested})
    return condition
