"""The OpenAPI description's schemas (`api.openapi`): what its bodies hold (a lineup
row, a feed, a field's coverage, provenance, the seed's section 7 error body), and the
patterns its parameters share with them (C5). Written from the same definitions the
service serves by (`store.fields`, `store.views.coverage`), so that the two cannot
drift apart.
"""

from __future__ import annotations

import re
from typing import Any

from store.fields import OPERATIONS, QUANTITY_UNITS, RECORD_FIELDS, VESSEL_STATUSES
from store.errors import CODES
from store.views.coverage import NOT_NULL, field_type

TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"
_REF = "#/components/"
#: Free text parameters: an empty or blank value is 400 (C5).
TEXT = {"type": "string", "pattern": r"\S"}


def any_case(*words: str) -> str:
    """A pattern matching exactly `words`, in any case: enumerations are read so."""
    spelled = ("".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word) for word in words)
    return f"^({'|'.join(spelled)})$"


def ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"{_REF}{kind}/{name}"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


# ---------------------------------------------------------------- schemas
def _field_schema(name: str) -> dict[str, Any]:
    kind = field_type(name)
    schema: dict[str, Any]
    if kind == "date-time":
        schema = {"type": "string", "format": "date-time", "pattern": TIME_PATTERN}
    elif kind == "integer":
        schema = {"type": "integer"}
    elif kind == "number":
        schema = {"type": "number"}
    else:
        schema = {"type": "string"}
    enums = {"operation": OPERATIONS, "vessel_status": VESSEL_STATUSES, "quantity_unit": QUANTITY_UNITS}
    if name in enums:
        schema["enum"] = list(enums[name])
    return schema if name in NOT_NULL else nullable(schema)


def _record_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A lineup record: fields in this order (also the CSV column order); blank values are null.",
        "required": list(RECORD_FIELDS),
        "additionalProperties": False,
        "properties": {name: _field_schema(name) for name in RECORD_FIELDS},
    }


def schemas() -> dict[str, Any]:
    text, number = {"type": "string"}, {"type": "number"}
    return {
        "LineupRecord": _record_schema(),
        "LineupPage": {
            "type": "object",
            "required": ["data", "next_cursor", "nextCursor"],
            "additionalProperties": False,
            "properties": {
                "data": {"type": "array", "items": ref("schemas", "LineupRecord")},
                "next_cursor": nullable(text) | {"description": "Cursor of the next page; null on the last."},
                "nextCursor": nullable(text) | {"description": "The same value as next_cursor."},
            },
        },
        "ChangesPage": {
            "type": "object",
            "required": ["data", "next_cursor", "nextCursor", "caught_up"],
            "additionalProperties": False,
            "properties": {
                "data": {"type": "array", "items": ref("schemas", "Change")},
                "next_cursor": text | {"description": "Cursor of the next call; never null: keep the last one."},
                "nextCursor": text | {"description": "The same value as next_cursor."},
                "caught_up": {"type": "boolean", "description": "True when nothing more is waiting now."},
            },
            "examples": [{
                "data": [
                    {"op": "delete", "id": "q3v6n2l7c4xkz0m9a8b1d5fh"},
                    {"op": "upsert", "row": {"id": "t2m8c4kq7z1xv5b9n3l6d0ps", "port_unlocode": "BRSSZ", "eta": "2024-03-05T06:00:00Z"}},
                ],
                "next_cursor": ".eJyLVjI0MDAwMDQ0MjI1.Qx3Hc0kFqk2NCiJ9fVqb4yEk8aE",
                "nextCursor": ".eJyLVjI0MDAwMDQ0MjI1.Qx3Hc0kFqk2NCiJ9fVqb4yEk8aE",
                "caught_up": True,
            }],
        },
        "Change": {
            "oneOf": [
                {
                    "type": "object", "required": ["op", "row"], "additionalProperties": False,
                    "properties": {"op": {"const": "upsert"}, "row": ref("schemas", "LineupRecord")},
                },
                {
                    "type": "object", "required": ["op", "id"], "additionalProperties": False,
                    "properties": {"op": {"const": "delete"}, "id": text},
                },
            ],
        },
        "History": {
            "type": "object",
            "required": ["id", "merge", "records"],
            "properties": {
                "id": text,
                "merge": {"type": "string", "enum": ["all", "by_source"]},
                "records": {"type": "array", "items": {
                    "type": "object",
                    "required": ["source_id", "source_name", "ref", "versions"],
                    "properties": {
                        "source_id": text, "source_name": text, "ref": text,
                        "versions": {"type": "array", "items": {
                            "type": "object",
                            "required": ["version", "updated_at", "replaced_at"],
                            "properties": {
                                "version": {"type": "integer"},
                                "updated_at": text, "replaced_at": nullable(text),
                                "eta": nullable(text), "etb": nullable(text), "etd": nullable(text),
                                "vessel_status": nullable(text), "quantity": nullable(number), "quantity_unit": nullable(text),
                            },
                        }},
                    },
                }},
            },
            "examples": [{
                "id": "t2m8c4kq7z1xv5b9n3l6d0ps", "merge": "all",
                "records": [{
                    "source_id": "5d0c2a4e-8c1b-4f5e-9a7d-3b2e1f0a9c8d", "source_name": "Santos Lineups", "ref": "A1",
                    "versions": [
                        {"version": 1, "updated_at": "2024-02-20T08:00:00Z", "replaced_at": "2024-02-27T09:00:00Z",
                         "eta": "2024-03-03T06:00:00Z", "etb": None, "etd": None, "vessel_status": "expected",
                         "quantity": 65000, "quantity_unit": "MT"},
                        {"version": 2, "updated_at": "2024-02-27T09:00:00Z", "replaced_at": None,
                         "eta": "2024-03-05T06:00:00Z", "etb": None, "etd": None, "vessel_status": "expected",
                         "quantity": 65000, "quantity_unit": "MT"},
                    ],
                }],
            }],
        },
        "Port": {
            "type": "object",
            "required": ["unlocode", "name", "country_name"],
            "properties": {"unlocode": text, "name": nullable(text), "country_name": nullable(text)},
        },
        "Feed": {
            "type": "object",
            "required": [
                "id", "name", "port_name", "port_unlocode", "ports", "frequency", "feed_type",
                "coverage_rating", "commodity_rating", "commercial_rating", "subscription_status",
            ],
            "additionalProperties": False,
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "name": text,
                "port_name": nullable(text),
                "port_unlocode": nullable(text),
                "ports": {"type": "array", "items": ref("schemas", "Port")},
                "frequency": nullable(text),
                "feed_type": nullable(text),
                "coverage_rating": nullable(number),
                "commodity_rating": nullable(number),
                "commercial_rating": nullable(number),
                "subscription_status": {"type": "string", "enum": ["active", "trial"]},
            },
        },
        "Sources": {
            "type": "object",
            "required": ["sources"],
            "additionalProperties": False,
            "properties": {"sources": {"type": "array", "items": ref("schemas", "Feed")}},
        },
        "SchemaField": {
            "type": "object",
            "required": ["name", "type", "nullable", "coverage"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "enum": list(RECORD_FIELDS)},
                "type": {"type": "string", "enum": ["string", "integer", "number", "date-time"]},
                "nullable": {"type": "boolean"},
                "coverage": {"type": "number", "minimum": 0, "maximum": 1},
                "values": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["value", "count"],
                        "additionalProperties": False,
                        "properties": {"value": text, "count": {"type": "integer", "minimum": 0}},
                    },
                },
            },
        },
        "SourceSchema": {
            "type": "object",
            "required": ["source_id", "source_name", "record_count", "first_date", "last_date", "updated_at", "fields"],
            "additionalProperties": False,
            "properties": {
                "source_id": {"type": "string", "format": "uuid"},
                "source_name": text,
                "record_count": {"type": "integer", "minimum": 0},
                "first_date": nullable({"type": "string", "format": "date-time", "pattern": TIME_PATTERN}),
                "last_date": nullable({"type": "string", "format": "date-time", "pattern": TIME_PATTERN}),
                "updated_at": nullable({"type": "string", "format": "date-time", "pattern": TIME_PATTERN}),
                "fields": {"type": "array", "items": ref("schemas", "SchemaField")},
            },
        },
        "Provenance": _provenance_schema(),
        "Error": {
            "type": "object",
            "description": "The error body of every failure.",
            "required": ["error"],
            "additionalProperties": False,
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message", "details"],
                    "additionalProperties": False,
                    "properties": {
                        "code": {"type": "string", "enum": list(CODES)},
                        "message": text,
                        "details": nullable({
                            "type": "object",
                            "description": "For VALIDATION_ERROR: the parameter and the reason; "
                            "a commodity name adds `suggestions`, a vessel status `allowed`.",
                            "required": ["parameter", "reason"],
                            "properties": {
                                "parameter": text,
                                "reason": text,
                                "suggestions": {"type": "array", "items": text},
                                "allowed": {"type": "array", "items": text},
                            },
                        }),
                    },
                },
            },
        },
        "Health": {
            "type": "object",
            "required": ["status"],
            "properties": {"status": {"type": "string", "enum": ["ok"]}},
        },
    }


def _provenance_schema() -> dict[str, Any]:
    """`store.merging.explain.explain`'s document (C2)."""
    time = {"type": "string", "format": "date-time", "pattern": TIME_PATTERN}
    who = {"ref": {"type": "string"}, "source_id": {"type": "string", "format": "uuid"}}
    supplier = {"type": "object", "required": ["ref", "source_id"], "additionalProperties": False, "properties": who}
    reporter = {
        "type": "object",
        "required": ["ref", "source_id", "source_name"],
        "additionalProperties": False,
        "properties": {**who, "source_name": {"type": "string"}},
    }
    record = {
        "type": "object",
        "required": ["source_id", "source_name", "ref", "created_at", "updated_at"],
        "additionalProperties": False,
        "properties": {**who, "source_name": {"type": "string"}, "created_at": time, "updated_at": time},
    }

    def field(name: str) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["value", "rule", "supplied_by"],
            "additionalProperties": False,
            "properties": {
                "value": _field_schema(name),
                "rule": {"type": "string"},
                "supplied_by": {"type": "array", "items": supplier},
            },
        }

    return {
        "type": "object",
        "description": "How one merged row was made: its records in order of precedence (latest "
        "update first), for every field the merged value, the rule and the records that gave it, "
        "and the fields whose records disagree.",
        "required": ["id", "merge", "records", "fields", "disagreements", "resolutions"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string"},
            "merge": {"type": "string", "enum": ["all", "by_source"]},
            "records": {"type": "array", "minItems": 1, "items": record},
            "fields": {
                "type": "object",
                "required": list(RECORD_FIELDS),
                "additionalProperties": False,
                "properties": {name: field(name) for name in RECORD_FIELDS},
            },
            "disagreements": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["field", "values"],
                    "additionalProperties": False,
                    "properties": {
                        "field": {"type": "string", "enum": list(RECORD_FIELDS)},
                        "values": {
                            "type": "array",
                            "minItems": 2,
                            "items": {
                                "type": "object",
                                "required": ["value", "records"],
                                "additionalProperties": False,
                                "properties": {"value": {}, "records": {"type": "array", "items": reporter}},
                            },
                        },
                    },
                },
            },
            "resolutions": {
                "type": "array",
                "description": "What the merge resolved: a record without an IMO number merged "
                "as the one IMO its vessel name has among the buyer's records (kind `vessel`), or a record "
                "of an unspecified commodity that joined the one specific commodity of its call (kind "
                "`commodity`), each said in plain words, with the records concerned.",
                "items": {
                    "type": "object",
                    "required": ["kind", "text", "records"],
                    "additionalProperties": False,
                    "properties": {
                        "kind": {"type": "string", "enum": ["vessel", "commodity"]},
                        "text": {"type": "string"},
                        "records": {"type": "array", "minItems": 1, "items": supplier},
                    },
                },
            },
        },
    }
