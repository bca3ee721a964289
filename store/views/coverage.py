"""A feed's field schema and coverage statistics (contract C7, GET /v1/schema/:sourceId).

Computed from the feed's stored records with SQL aggregates, one query for the counts
and dates and one per enumeration: `COUNT(column)` counts the records where a field
is not blank (the store keeps blanks as NULL, C1), and coverage is that count over the
feed's record count, 0–1, rounded to 4 places (0 for a feed without records).

Decisions (docs/api.md): the statistics describe every stored record of the feed,
including those without a commodity, which are never served (C1) but show as the
commodity's coverage below 1. Fields a served row derives (`id`, `source_*`,
`commodity_normalized*`, `combined_date`, `created_at`, `updated_at`) are covered
where each record would give them a value.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, or_, select
from sqlalchemy.orm import Session

from store.fields import (
    ENUMERATIONS,
    INTEGER_FIELDS,
    NUMBER_FIELDS,
    RECORD_FIELDS,
    TIME_FIELDS,
    VESSEL_TYPES,
    format_time,
)
from store.database.schema import Feed, Record

#: Fields a served record always has (C1, C2): the others may be null.
NOT_NULL: frozenset[str] = frozenset(
    {"id", "source_id", "source_name", "port_unlocode", "commodity", "created_at", "updated_at"}
)
#: Enumerations whose values are counted: the closed ones and the open vessel_type (C1).
ENUM_VALUES: dict[str, tuple[str, ...]] = {**ENUMERATIONS, "vessel_type": VESSEL_TYPES}
_LEAF_FIELDS = ("commodity_normalized", "commodity_normalized_group", "commodity_normalized_subgroup")


def field_type(name: str) -> str:
    """The C7 type of a record field: string, integer, number or date-time."""
    if name in TIME_FIELDS:
        return "date-time"
    if name in INTEGER_FIELDS:
        return "integer"
    if name in NUMBER_FIELDS:
        return "number"
    return "string"


def _non_blank(name: str):
    """The SQL expression counting the records that give field `name` a value."""
    if name in ("id", "source_id", "source_name", "created_at", "updated_at"):
        return func.count()
    if name in _LEAF_FIELDS:
        return func.count(Record.commodity_leaf)
    if name == "combined_date":
        dated = or_(Record.eta.is_not(None), Record.etb.is_not(None), Record.etd.is_not(None))
        return func.count(case((dated, 1)))
    return func.count(getattr(Record, name))


def _enum_counts(session: Session, feed_id: str, name: str) -> list[dict[str, Any]]:
    """`[{"value", "count"}]` of an enumeration: its listed values in the seed's order
    (0 when absent), then any other stored values (vessel_type only) alphabetically."""
    column = getattr(Record, name)
    rows = session.execute(
        select(column, func.count()).where(Record.feed_id == feed_id, column.is_not(None)).group_by(column)
    )
    counts = dict(rows.all())
    listed = ENUM_VALUES[name]
    others = sorted(v for v in counts if v not in listed)
    return [{"value": v, "count": int(counts.get(v, 0))} for v in (*listed, *others)]


def feed_schema(session: Session, feed: Feed) -> dict[str, Any]:
    """The C7 schema document of `feed`: `source_id`, `source_name`, `record_count`,
    `first_date`, `last_date` (earliest and latest eta/etb/etd), `updated_at` (latest
    record update) and `fields` in C1 order, each with name, type, nullable, coverage
    and, for enumerations, `values` with counts. Times in the C1 format, null when the
    feed has no records."""
    counts = [_non_blank(name).label(name) for name in RECORD_FIELDS]
    dates = [
        *(func.min(getattr(Record, f)).label(f"min_{f}") for f in ("eta", "etb", "etd")),
        *(func.max(getattr(Record, f)).label(f"max_{f}") for f in ("eta", "etb", "etd")),
        func.max(Record.updated_at).label("last_update"),
    ]
    row = session.execute(
        select(func.count().label("total"), *counts, *dates).where(Record.feed_id == feed.id)
    ).one()._mapping
    total = int(row["total"])
    fields = []
    for name in RECORD_FIELDS:
        field = {
            "name": name,
            "type": field_type(name),
            "nullable": name not in NOT_NULL,
            "coverage": round(int(row[name]) / total, 4) if total else 0.0,
        }
        if name in ENUM_VALUES:
            field["values"] = _enum_counts(session, feed.id, name)
        fields.append(field)
    firsts = [row[f"min_{f}"] for f in ("eta", "etb", "etd") if row[f"min_{f}"] is not None]
    lasts = [row[f"max_{f}"] for f in ("eta", "etb", "etd") if row[f"max_{f}"] is not None]
    return {
        "source_id": feed.id,
        "source_name": feed.name,
        "record_count": total,
        "first_date": format_time(min(firsts)) if firsts else None,
        "last_date": format_time(max(lasts)) if lasts else None,
        "updated_at": format_time(row["last_update"]),
        "fields": fields,
    }
