"""Convert ``qdrant_client.models.Filter`` into the Qdrant Edge engine's filter classes."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, cast

import qdrant_edge as qe
from qdrant_client import models

from ..errors import InvalidArgumentError


def to_edge_filter(query_filter: models.Filter | None) -> qe.Filter | None:
    """The Edge twin of a qdrant-client filter (None stays None); unsupported parts raise a clear error."""
    if query_filter is None:
        return None
    if not isinstance(query_filter, models.Filter):
        raise InvalidArgumentError(
            f"query_filter must be a qdrant_client.models.Filter, not {type(query_filter).__name__}."
        )
    return _filter(query_filter)


def _filter(query_filter: models.Filter) -> qe.Filter:
    min_should = query_filter.min_should
    return qe.Filter(
        must=_conditions(query_filter.must),
        should=_conditions(query_filter.should),
        must_not=_conditions(query_filter.must_not),
        min_should=(
            qe.MinShould(conditions=_conditions(min_should.conditions) or [], min_count=min_should.min_count)
            if min_should is not None
            else None
        ),
    )


def _conditions(conditions: Any) -> list[Any] | None:
    if conditions is None:
        return None
    items = conditions if isinstance(conditions, list) else [conditions]
    return [_condition(c) for c in items]


def _condition(condition: Any) -> Any:
    if isinstance(condition, models.Filter):
        return _filter(condition)
    if isinstance(condition, models.FieldCondition):
        return _field_condition(condition)
    if isinstance(condition, models.IsEmptyCondition):
        return qe.IsEmptyCondition(key=condition.is_empty.key)
    if isinstance(condition, models.IsNullCondition):
        return qe.IsNullCondition(key=condition.is_null.key)
    if isinstance(condition, models.HasIdCondition):
        return qe.HasIdCondition(point_ids={_point_id(i) for i in condition.has_id})
    if isinstance(condition, models.HasVectorCondition):
        return qe.HasVectorCondition(vector=condition.has_vector)
    if isinstance(condition, models.NestedCondition):
        return qe.NestedCondition(key=condition.nested.key, filter=_filter(condition.nested.filter))
    raise InvalidArgumentError(
        f"filter condition {type(condition).__name__} is not supported on embedded Qdrant Edge; "
        "use field, is_empty, is_null, has_id, has_vector or nested conditions."
    )


def _point_id(value: Any) -> Any:
    if isinstance(value, str):
        return uuid.UUID(value)
    return value


def _field_condition(condition: models.FieldCondition) -> qe.FieldCondition:
    geo_radius = condition.geo_radius
    box = condition.geo_bounding_box
    polygon = condition.geo_polygon
    count = condition.values_count
    return qe.FieldCondition(
        key=condition.key,
        match=_match(condition.match) if condition.match is not None else None,
        range=_range(condition.range) if condition.range is not None else None,
        geo_bounding_box=(
            qe.GeoBoundingBox(top_left=_geo_point(box.top_left), bottom_right=_geo_point(box.bottom_right))
            if box is not None
            else None
        ),
        geo_radius=(
            qe.GeoRadius(center=_geo_point(geo_radius.center), radius=geo_radius.radius)
            if geo_radius is not None
            else None
        ),
        geo_polygon=(
            qe.GeoPolygon(
                exterior=[_geo_point(p) for p in polygon.exterior.points],
                interiors=[[_geo_point(p) for p in ring.points] for ring in polygon.interiors or []] or None,
            )
            if polygon is not None
            else None
        ),
        values_count=(
            qe.ValuesCount(lt=count.lt, gt=count.gt, gte=count.gte, lte=count.lte) if count is not None else None
        ),
        is_empty=condition.is_empty,
        is_null=condition.is_null,
    )


def _geo_point(point: models.GeoPoint) -> qe.GeoPoint:
    return qe.GeoPoint(lon=point.lon, lat=point.lat)


def _match(match: Any) -> Any:
    if isinstance(match, models.MatchValue):
        return qe.MatchValue(value=match.value)
    if isinstance(match, models.MatchAny):
        return qe.MatchAny(any=cast(list[str], list(match.any)))
    if isinstance(match, models.MatchExcept):
        return qe.MatchExcept(except_=cast(list[str], list(match.except_)))
    if isinstance(match, models.MatchText):
        return qe.MatchText(text=match.text)
    if isinstance(match, models.MatchTextAny):
        return qe.MatchTextAny(text_any=match.text_any)
    if isinstance(match, models.MatchPhrase):
        return qe.MatchPhrase(phrase=match.phrase)
    raise InvalidArgumentError(f"match {type(match).__name__} is not supported on embedded Qdrant Edge.")


def _range(value: Any) -> Any:
    if isinstance(value, models.DatetimeRange):
        return qe.RangeDateTime(gte=_iso(value.gte), gt=_iso(value.gt), lte=_iso(value.lte), lt=_iso(value.lt))
    return qe.RangeFloat(gte=value.gte, gt=value.gt, lte=value.lte, lt=value.lt)


def _iso(value: dt.datetime | dt.date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return dt.datetime.combine(value, dt.time()).isoformat()
