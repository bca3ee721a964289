"""Python keyword filters as the API's query parameters."""

from __future__ import annotations

from typing import Any


def query_params(filters: dict[str, Any]) -> dict[str, str]:
    """Python keyword filters as /v1/lineups parameters: `from_` is `from`, booleans
    `true`/`false`, lists of commodities joined with commas; None is left out."""
    params = {}
    for name, value in filters.items():
        if value is None:
            continue
        name = name.rstrip("_")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        params[name] = str(value)
    return params
