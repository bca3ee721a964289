"""The explorer's CSV download: the whole filtered result as one C9 document.

The text is `store.views.csvtext`'s, the same writer behind the API's CSV pages and share
links, so a download and an export of the same rows are the same bytes.
"""

from __future__ import annotations

import pandas as pd

from store.views.csvtext import csv_document


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """`frame`'s rows (C1 columns, any others ignored) as a CSV document: BOM, header,
    rows."""
    return csv_document(frame)
