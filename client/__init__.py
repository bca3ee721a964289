"""A Python client of the lineup service's REST API (issue 46).

    from client import Client
    api = Client("https://lineups.example.com", "lk_…")
    frame = api.lineups(port="NLRTM", latest=True)       # every page, one DataFrame
    api.sync("lineups.sqlite", port="NLRTM")              # a local table kept equal to the query

`Client` retries what is worth retrying (429 after its Retry-After, 502/503/504 and
dropped connections with backoff) and raises `ApiError`, with the contract's code,
message, details and request id, for the rest. `sync` applies the change feed
(`GET /v1/lineups/changes`) to a SQLite table, atomically. docs/client.md shows both.
"""

from client.client import ApiError, Client, Retry
from client.sync import SyncReport, sync

__all__ = ["ApiError", "Client", "Retry", "SyncReport", "sync"]
