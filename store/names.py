"""Rows named as operators type them (contract C11: "an id or a unique name").

Feeds and buyers have names, share links optional labels (unique among one buyer's
links). A name is matched ignoring case and runs of spaces ("santos  port LINEUP" is
"Santos Port Lineup"), so names must be unique in that sense too (`check_free`). A name that matches nothing is NOT_FOUND
with the nearest names in the message, so that a typo is one step from the fix.
Functions take a session and neither commit nor close it.
"""

from __future__ import annotations

import difflib
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from store.errors import NotFound, ValidationError
from store.ids import canonical_uuid

#: Near names offered when a name matches nothing.
MAX_SUGGESTIONS = 3


def name_key(name: str) -> str:
    """The form names are compared in: case folded, runs of whitespace one space."""
    return " ".join(name.split()).casefold()


def find_named(
    session: Session, model: type, column: InstrumentedAttribute, ident: str, kind: str,
    among: ColumnElement[bool] | None = None, ambiguous: str = "give the exact name or the id",
) -> Any:
    """The row of `model` (among the rows `among` selects, when given) whose id is
    `ident`, else whose `column` matches it exactly, else ignoring case and spacing.
    Raises NotFound (with near names) when none does, and ValidationError (saying
    `ambiguous`) when several do."""
    scope = [among] if among is not None else []
    row_id = canonical_uuid(ident.strip())
    row = session.get(model, row_id) if row_id else None
    if row is not None and (among is None or session.scalar(select(model.id).where(model.id == row.id, *scope))):
        return row
    named = session.execute(select(model.id, column).where(column.is_not(None), *scope)).all()
    exact = [row_id for row_id, name in named if name == ident]
    wanted = name_key(ident)
    same = exact or [row_id for row_id, name in named if name_key(name) == wanted]
    if len(same) == 1:
        return session.get(model, same[0])
    if same:
        names = ", ".join(repr(name) for row_id, name in named if row_id in same)
        raise ValidationError.parameter(kind, f"{names} all match {ident!r}: {ambiguous}")
    raise NotFound(f"No {kind} with id or name {ident!r}{_did_you_mean(ident, [name for _, name in named])}")


def check_free(
    session: Session, column: InstrumentedAttribute, name: str, kind: str, parameter: str = "name",
    among: ColumnElement[bool] | None = None,
) -> None:
    """Raise ValidationError when a row's `column` (among the rows `among` selects,
    when given) matches `name` ignoring case and spacing: such names could not tell
    the rows apart."""
    wanted = name_key(name)
    scope = [among] if among is not None else []
    for (taken,) in session.execute(select(column).where(column.is_not(None), *scope)):
        if name_key(taken) == wanted:
            raise ValidationError.parameter(parameter, f"a {kind} named {taken!r} exists already")


def suggestions(ident: str, names: list[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Up to `limit` of `names` near `ident`: those that contain it or that it
    contains, then close spellings, best first."""
    wanted = name_key(ident)
    if not wanted:
        return []
    keys = {name_key(name): name for name in names}
    found = [name for key, name in keys.items() if wanted in key or key in wanted]
    for key in difflib.get_close_matches(wanted, list(keys), n=limit, cutoff=0.6):
        if keys[key] not in found:
            found.append(keys[key])
    return found[:limit]


def _did_you_mean(ident: str, names: list[str]) -> str:
    near = suggestions(ident, names)
    return f"; did you mean {' or '.join(repr(name) for name in near)}?" if near else ""
