"""One page of a lineup query's result, read from a kept view (C3, C4): what
`GET /v1/lineups` sends, and the change feed's first pages (`store.views.change_feed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd
from sqlalchemy.orm import Session

from store.reference.taxonomy import Taxonomy
from store.views import sql
from store.query import LineupQuery, Position
from store.views.stored import frame_of


@dataclass(frozen=True)
class Page:
    """One page of a result: its rows as read (tuples in `READ_COLUMNS` order, what
    the JSON and CSV writers take) and the position of its last row when another
    page follows (C4), else None; `rows` is the same page as a frame (C1 columns,
    merge-engine dtypes: the explorer's tables, `Lineups.frame`), made when first
    asked for."""

    records: list[tuple]
    next: Position | None

    @cached_property
    def rows(self) -> pd.DataFrame:
        return frame_of(self.records)



def read_page(
    session: Session, query: LineupQuery, taxonomy: Taxonomy, target: sql.Target, after: Position | None, limit: int
) -> Page:
    """The `limit` rows of `query`'s result in the view `target` after position
    `after` (C3, C4), in one statement."""
    sparse = sql.is_sparse(session, query, taxonomy, target)
    # Reads of the views run on the session's connection, as Core statements: the
    # ORM's handling, which a statement of columns does not need, cost ~45 µs a
    # statement and more a row (in process, 600 distinct first pages 3.08 -> 2.90 ms
    # of CPU each; a share link's 63,561 rows read in 0.57 s instead of 0.83 s).
    statement = sql.page_statement(query, taxonomy, target, after, limit + 1, sparse)
    rows = session.connection().execute(*statement).all()
    more = len(rows) > limit
    rows = rows[:limit]
    following = sql.position(rows[-1][-1], rows[-1][0]) if more else None
    return Page([row[:-1] for row in rows], following)
