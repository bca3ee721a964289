"""Rows of the API (C1 JSON records) as a pandas DataFrame: the C1 columns in order,
times tz-aware UTC, `dwt` a nullable integer, `quantity` a float, text as objects."""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from store.fields import INTEGER_FIELDS, NUMBER_FIELDS, RECORD_FIELDS, TIME_FIELDS


def frame_of(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """`rows` (dicts of the C1 fields) as a typed frame; an empty one keeps the columns."""
    frame = pd.DataFrame.from_records(list(rows), columns=list(RECORD_FIELDS))
    for name in TIME_FIELDS:
        frame[name] = pd.to_datetime(frame[name], utc=True, format="%Y-%m-%dT%H:%M:%SZ")
    for name in INTEGER_FIELDS:
        frame[name] = pd.to_numeric(frame[name]).astype("Int64")
    for name in NUMBER_FIELDS:
        frame[name] = pd.to_numeric(frame[name]).astype(float)
    return frame
