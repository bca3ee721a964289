"""The explorer's one way to the buyer's lineup rows (issue 17), over the kept views of
issue 15 (`store.views.lineups.Lineups`, which `Account.store()` hands over in
`session.info[SERVICE]`).

Every function takes the caller's SQLAlchemy session (one transaction per action,
opened by `Account.store()`), the buyer and a validated `LineupQuery`, and blocks:
the explorer calls them only from its thread pool (`ExplorerContext.off_loop`),
never on the event loop. What a filter change reads is bounded by the screen, not by
the result: a page of rows (`page`), the count, the charts' totals computed in SQL
(`summary`) and the rows near the page for its duplicate check (`near`). Nothing reads
the whole result: the CSV download is the API's, streamed (`explorer.auth.DownloadHandler`).
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd
from sqlalchemy.orm import Session

from store.views.lineups import Summary
from store.query import LineupQuery
from store.views.sql import ORDERABLE

#: The key of `session.info` under which `Account.store()` passes the `Lineups`.
SERVICE = "lineups.service"
#: The columns a page can be ordered by (besides the C3 order).
SORTABLE = ORDERABLE


def _service(session: Session):
    return session.info[SERVICE]


def page(
    session: Session, buyer_id: str, query: LineupQuery, offset: int, limit: int,
    sort: tuple[str, bool] | None = None,
) -> pd.DataFrame:
    """Rows `offset` … `offset + limit - 1` of the result: in C3 order, or with `sort`
    = (column of SORTABLE, ascending) ordered by that column, numbers as numbers,
    text ignoring case, blanks last in both directions, ties in C3 order."""
    return _service(session).rows_at(buyer_id, query, offset, limit, sort)


def near(
    session: Session, buyer_id: str, query: LineupQuery, ports: Sequence[str], spans: Sequence[tuple[int, int]]
) -> pd.DataFrame:
    """The result's rows at `ports` dated within one of `spans` (ns, first and last)."""
    return _service(session).near(buyer_id, query, ports, spans)


def summary(session: Session, buyer_id: str, query: LineupQuery) -> Summary:
    """The charts' totals of the whole result (`Lineups.summary`)."""
    return _service(session).summary(buyer_id, query)


def count(session: Session, buyer_id: str, query: LineupQuery) -> int:
    """How many rows the result has."""
    return _service(session).count(buyer_id, query)


def explain(session: Session, buyer_id: str, row_id: str, query: LineupQuery) -> dict[str, Any]:
    """The provenance of one row the buyer can see under `query`'s merge mode and
    feed (`store.merging.explain.explain`'s dict). Raises NotFound for an unknown row."""
    return _service(session).explain(buyer_id, row_id, query)
