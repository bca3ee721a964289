"""Lineup filters said in words, for people rather than URLs.

The share links list and the explorer's summaries show a frozen /v1/lineups query
(`{"port": "NLRTM", "latest": "true"}`) as "Port NLRTM · latest call per vessel
only". Unknown parameters are shown as they are, so nothing a link holds is hidden.
"""

from __future__ import annotations

from typing import Mapping

from store.errors import Forbidden, LineupsError, NotFound, ValidationError
from store.fields import VESSEL_STATUSES

#: The filters' names as the explorer's form shows them.
FILTER_LABELS = {
    "source": "Feed", "port": "Port", "country": "Country", "port_name": "Port name", "from": "From date",
    "to": "To date", "commodity": "Commodity", "status": "Vessel status", "latest": "Latest call", "merge": "Rows",
}
#: A status filter of every status but `departed`, said as "not departed".
_NOT_DEPARTED = [status for status in VESSEL_STATUSES if status != "departed"]


def describe_filters(
    params: Mapping[str, str], feed_names: Mapping[str, str] | None = None, port_names: Mapping[str, str] | None = None,
) -> str:
    """`params` (one value per /v1/lineups parameter) in words; "All lineups" when
    nothing narrows the result. `feed_names` maps feed ids to names, `port_names`
    UN/LOCODEs to names ("port Santos (BRSSZ)", issue 45 item 10)."""
    feed_names, port_names = feed_names or {}, port_names or {}
    params = {k: v for k, v in params.items() if v not in (None, "")}
    parts: list[str] = []
    source = params.pop("source", "all")
    if source.lower() != "all":
        parts.append(f"feed {feed_names.get(source, source)}")
    if "port" in params:
        code = params.pop("port").upper()
        parts.append(f"port {port_names[code]} ({code})" if port_names.get(code) else f"port {code}")
    if "country" in params:
        parts.append(f"country {params.pop('country')}")
    if "port_name" in params:
        parts.append(f"port name contains “{params.pop('port_name')}”")
    if "commodity" in params:
        names = [n.strip() for n in params.pop("commodity").split(",") if n.strip()]
        parts.append("commodity " + " or ".join(names))
    start, end = params.pop("from", None), params.pop("to", None)
    if start and end:
        parts.append(f"from {start} to {end}")
    elif start:
        parts.append(f"from {start}")
    elif end:
        parts.append(f"until {end}")
    if "status" in params:
        wanted = {n.strip().lower() for n in params.pop("status").split(",")}
        statuses = [status for status in VESSEL_STATUSES if status in wanted]
        if statuses == _NOT_DEPARTED:
            parts.append("not departed")
        else:
            parts.append("status " + (" or ".join(statuses)))
    if params.pop("latest", "false").lower() == "true":
        parts.append("latest call per vessel and port only")
    if params.pop("merge", "all").lower() == "by_source":
        parts.append("one row per feed (not merged)")
    params.pop("format", None)
    parts.extend(f"{name}={value}" for name, value in sorted(params.items()))
    if not parts:
        return "All lineups"
    text = " · ".join(parts)
    return text[0].upper() + text[1:]


def problem(error: LineupsError) -> str:
    """What went wrong with the buyer's filters, in their words: no status codes,
    parameter names or contract clauses (issue 17, item 13)."""
    if isinstance(error, ValidationError):
        details = error.details if isinstance(error.details, dict) else {}
        name, reason = details.get("parameter"), details.get("reason", "")
        if name == "from" and "after" in reason:
            return "The From date is after the To date: pick a From date on or before the To date."
        if name == "commodity":
            suggestions = details.get("suggestions") or []
            hint = f" Did you mean {' or '.join(suggestions[:3])}?" if suggestions else ""
            return f"That commodity is not in the list.{hint}"
        if name in ("from", "to"):
            return f"The {FILTER_LABELS[name]} is not a date: write it as YYYY-MM-DD, e.g. 2026-11-24."
        if name == "port":
            return "That is not a port code: pick a port from the list."
        label = FILTER_LABELS.get(name or "", "One of the filters")
        return f"{label} cannot be used as given. Reset the filters and try again."
    if isinstance(error, (Forbidden, NotFound)):
        return "You no longer have a subscription to this feed: pick another feed, or all your feeds."
    return "Something went wrong while reading your lineups. Try again in a moment."
