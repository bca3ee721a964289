"""Stored records as the merge engine's input frame (contract C2.1).

One row per stored record of the given feeds whose commodity is not blank (C1: kept
in the store, never served), with the feed's name as `source_name`, times as
`datetime64[ns, UTC]`, the commodity's taxonomy names, and the merge key parts
`vessel_key` and `commodity_key`.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from store.normalize import commodity_text_key
from store.schema import Feed, Record
from store.taxonomy import default_taxonomy

_COLUMNS = (
    "ref", "port_unlocode", "port_name", "country_name", "berth_terminal", "vessel_imo",
    "vessel_name", "vessel_type", "dwt", "operation", "commodity", "quantity", "quantity_unit",
    "eta", "etb", "etd", "vessel_status", "shipper", "receiver", "charterer", "operator",
    "ship_agent", "vessel_key", "commodity_leaf", "created_at", "updated_at",
)
_TIMES = ("eta", "etb", "etd", "created_at", "updated_at")


def load_records(session: Session, feed_ids: Iterable[str]) -> pd.DataFrame:
    """The merge input of the feeds `feed_ids` (may be empty)."""
    feed_ids = sorted(set(feed_ids))
    return _load(session, Record.feed_id.in_(feed_ids), Record.commodity.is_not(None))


def load_changed(session: Session, feed_id: str, after_version: int) -> pd.DataFrame:
    """The records of one feed written after its `data_version` was `after_version`
    (`changed_version` greater), shaped like `load_records`. Unlike the merge input it
    keeps records whose commodity is now blank: their `ref` says which cached record
    they replace; the caller drops them from the merge input (C1)."""
    return _load(session, Record.feed_id == feed_id, Record.changed_version > after_version)


def _load(session: Session, *where) -> pd.DataFrame:
    statement = (
        select(Record.feed_id.label("source_id"), Feed.name.label("source_name"), *(getattr(Record, c) for c in _COLUMNS))
        .join(Feed, Feed.id == Record.feed_id)
        .where(*where)
    )
    result = session.execute(statement)
    frame = pd.DataFrame(result.all(), columns=list(result.keys()))
    return shape(frame)


def shape(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a frame of stored rows the merge input's dtypes and derived columns."""
    for column in _TIMES:
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    frame["dwt"] = pd.array(frame["dwt"], dtype="Int64")
    frame["quantity"] = pd.to_numeric(frame["quantity"], errors="coerce").astype(float)
    taxonomy = default_taxonomy()
    leaves = {}
    for leaf_id in frame["commodity_leaf"].dropna().unique():
        try:
            leaves[leaf_id] = taxonomy.leaf(leaf_id)
        except KeyError:  # a leaf that a newer taxonomy dropped: treat as unresolved
            leaves[leaf_id] = None
    leaf = frame["commodity_leaf"].map(lambda leaf_id: leaves.get(leaf_id))  # None: unresolved
    frame["commodity_normalized"] = leaf.map(lambda l: l.name if l else None)
    frame["commodity_normalized_subgroup"] = leaf.map(lambda l: l.subgroup if l else None)
    frame["commodity_normalized_group"] = leaf.map(lambda l: l.group if l else None)
    raw_keys = {raw: "raw:" + commodity_text_key(raw) for raw in frame["commodity"].dropna().unique()}
    resolved = leaf.map(lambda l: l.id if l else None)
    frame["commodity_key"] = np.where(resolved.notna(), resolved, frame["commodity"].map(raw_keys))
    frame = frame.drop(columns=["commodity_leaf"])
    # The engine works on object columns of str/None (pandas 3 would infer its
    # NaN-based string dtype, which turns None into NaN).
    text = [c for c in frame.columns if isinstance(frame[c].dtype, pd.StringDtype)]
    return frame.astype({c: object for c in text}) if text else frame
