"""`Client`: the lineup service's endpoints as Python calls, robust by default.

- A 429 waits for its `Retry-After` (at most `Retry.max_wait_s`) and goes on.
- 502, 503, 504 and dropped or timed-out connections are tried again with
  exponential backoff and full jitter (`Retry.attempts`, `Retry.backoff_s`).
- Any other error answer (4xx, 500) is never tried again: it raises `ApiError` with
  the contract's code, message and details (C5) and the response's request id.
- Every request has a timeout; long downloads show a progress bar (tqdm) only when
  standard error is a terminal.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pandas as pd
import requests
from tqdm import tqdm

from client.errors import ApiError
from client.frames import frame_of
from client.params import query_params
from client.sync import SyncReport, sync

#: Statuses tried again with backoff: a proxy or the service is briefly away.
RETRIED = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """How requests are tried again: `attempts` tries in all for 502/503/504 and
    dropped connections, the n-th pause drawn from [0, `backoff_s` × 2ⁿ] (at most
    `max_backoff_s`); a 429 waits its Retry-After, at most `max_wait_s`, up to
    `rate_limited` times in a row."""

    attempts: int = 6
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_wait_s: float = 60.0
    rate_limited: int = 20


class Client:
    """The lineup service at `base_url`, called with the API key `key`."""

    def __init__(
        self, base_url: str, key: str, *, timeout: float = 60.0, retry: Retry = Retry(),
        progress: bool | None = None, session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout, self.retry, self.sleep = timeout, retry, sleep
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.http = session or requests.Session()
        self.http.headers["X-API-Key"] = key

    # ------------------------------------------------------------ endpoints
    def pages(self, **filters: Any) -> Iterator[pd.DataFrame]:
        """The result of a /v1/lineups query a page at a time, each a DataFrame
        (`lineups`'s columns and types); `limit` sets the page size (default 500)."""
        params = {"limit": 500, **query_params(filters)}
        with tqdm(desc="lineups", unit=" rows", disable=not self.progress) as bar:
            while True:
                body = self.get("/v1/lineups", params)
                bar.update(len(body["data"]))
                yield frame_of(body["data"])
                if body["next_cursor"] is None:
                    return
                params = {**params, "cursor": body["next_cursor"]}

    def lineups(self, **filters: Any) -> pd.DataFrame:
        """Every row of a /v1/lineups query (`port="NLRTM"`, `from_="2024-03-01"`,
        `latest=True`, `commodity=["coal", "wheat"]`, `merge="by_source"`, …) in one
        DataFrame: the C1 columns in order, times tz-aware UTC, `dwt` and `quantity`
        numeric."""
        return pd.concat(list(self.pages(**filters)), ignore_index=True)

    def sources(self) -> list[dict[str, Any]]:
        """The feeds the key's buyer subscribes to (C7)."""
        return self.get("/v1/sources")["sources"]

    def schema(self, source_id: str) -> dict[str, Any]:
        """A feed's fields, types and coverage (C7)."""
        return self.get(f"/v1/schema/{source_id}")

    def provenance(self, row_id: str, **params: Any) -> dict[str, Any]:
        """The records one merged row came from (`merge=`, `source=` as for `lineups`)."""
        return self.get(f"/v1/lineups/{row_id}/provenance", query_params(params))

    def history(self, row_id: str, **params: Any) -> dict[str, Any]:
        """Every stored version of the records behind one merged row."""
        return self.get(f"/v1/lineups/{row_id}/history", query_params(params))

    def changes(self, cursor: str | None = None, **filters: Any) -> dict[str, Any]:
        """One page of the change feed of a query: `{"data": [{"op", "row" | "id"}],
        "next_cursor", "caught_up"}`. Raises ApiError with `cursor_expired` set when
        the cursor must be dropped (`sync` starts again by itself)."""
        params = query_params(filters)
        if cursor is not None:
            params["cursor"] = cursor
        return self.get("/v1/lineups/changes", params)

    def sync(self, path: str, table: str = "lineups", parquet: str | None = None, **filters: Any) -> SyncReport:
        """Keep the SQLite file `path`'s `table` equal to the query by applying the
        change feed (`client.sync.sync`); `parquet`, a Parquet copy beside it."""
        return sync(self, path, table, parquet, **filters)

    # ------------------------------------------------------------ transport
    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET `path` and its JSON body, tried again as `Retry` says; raises ApiError
        for an error answer, or the last connection error once tries run out."""
        backoffs, waits = 0, 0
        while True:
            try:
                response = self.http.get(self.base_url + path, params=params, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout):
                backoffs += 1
                if backoffs >= self.retry.attempts:
                    raise
                self.sleep(self._backoff(backoffs))
                continue
            if response.status_code == 429 and waits < self.retry.rate_limited:
                waits += 1
                self.sleep(min(float(response.headers.get("Retry-After", 1)), self.retry.max_wait_s))
                continue
            if response.status_code in RETRIED and backoffs + 1 < self.retry.attempts:
                backoffs += 1
                self.sleep(self._backoff(backoffs))
                continue
            if response.status_code >= 400:
                raise ApiError.of(response)
            return response.json()

    def _backoff(self, tries: int) -> float:
        return random.uniform(0, min(self.retry.backoff_s * 2 ** (tries - 1), self.retry.max_backoff_s))
