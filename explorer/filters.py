"""The explorer's filters: one /v1/lineups query as param, so that widgets edit it.

`LineupFilters` offers the buyer's feeds, their ports and countries and the commodity
taxonomy; `to_args()` gives exactly the API's query parameters (and the page's URL,
issue 17 item 6), `set_args()` reads them back (saying in words what it could not
use), and `query()` validates them with the API's own parser.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

import param

from explorer.session import Account
from explorer.words import describe_filters, problem
from store.errors import LineupsError
from store.fields import VESSEL_STATUSES
from store.query import PARAMETERS, LineupQuery, parse_query

ALL = "all"
MERGE_MODES = {"Merge all feeds": "all", "One row per feed": "by_source"}
#: The vessel-status filter's choices, label → status (C1 spelling, seed order).
STATUSES = {status.capitalize(): status for status in VESSEL_STATUSES}
#: The calls that have not departed: with From today, the first view ("upcoming
#: calls", issue 45 item 4), not the calls whose ETA was days ago and that left today.
NOT_DEPARTED = [status for status in VESSEL_STATUSES if status != "departed"]
#: The /v1/lineups parameters an address of the explorer may name (not the page's
#: size, cursor or format: the screen has its own pages, and downloads are CSV).
ADDRESS_FILTERS = tuple(name for name in PARAMETERS if name not in ("limit", "cursor", "format"))


def today() -> dt.date:
    """Today in UTC, the explorer's calendar."""
    return dt.datetime.now(dt.timezone.utc).date()


def commodity_tree(taxonomy) -> dict[str, str]:
    """The commodity filter's choices, label → taxonomy name, in tree order: each
    group, then each of its subgroups followed by its commodities. A label starts
    with its own name (the search matches the start), then where it sits:
    "Soybeans · Dry Bulk › Grains & Oilseeds"."""
    leaves: dict[tuple[str, str], list[str]] = {}
    for leaf in taxonomy.leaves:
        leaves.setdefault((leaf.group, leaf.subgroup), []).append(leaf.name)
    tree: dict[str, str] = {}
    for group in taxonomy.groups():
        tree[f"{group} (all)"] = group
        for subgroup in taxonomy.subgroups(group):
            tree[f"{subgroup} · {group} (all)"] = subgroup
            for name in sorted(leaves.get((group, subgroup), [])):
                tree[f"{name} · {group} › {subgroup}"] = name
    return tree


class LineupFilters(param.Parameterized):
    """One /v1/lineups query, as widgets can edit it."""

    source = param.Selector(default=ALL, objects={"All my feeds": ALL}, doc="The feed, or all of the buyer's feeds.")
    port = param.Selector(default="", objects={"Any port": ""}, doc="A port of the buyer's feeds (UN/LOCODE).")
    country = param.Selector(default="", objects={"Any country": ""}, doc="The country of the port.")
    port_name = param.String(default="", doc="Part of the port's name.")
    date_from = param.CalendarDate(default=None, allow_None=True, label="From", doc="First day (UTC).")
    date_to = param.CalendarDate(default=None, allow_None=True, label="To", doc="Last day (UTC).")
    commodity = param.ListSelector(default=[], objects=[], doc="Commodity groups, subgroups or leaves.")
    status = param.ListSelector(default=[], objects=STATUSES, label="Vessel status", doc="""
        The vessel statuses to keep (none: every status).""")
    latest = param.Boolean(default=False, label="Latest call per vessel only")
    merge = param.Selector(default=ALL, objects=MERGE_MODES, label="Merge")

    def __init__(self, feeds: list[dict[str, Any]] = (), commodities: Mapping[str, str] | list[str] = (), **params):
        super().__init__()
        self._feeds = list(feeds)
        self.param.source.objects = {"All my feeds": ALL, **{f["name"]: f["id"] for f in feeds}}
        self.param.commodity.objects = dict(commodities) if isinstance(commodities, Mapping) else list(commodities)
        self._narrow_places()
        self.param.update(**params)

    @param.depends("source", watch=True)
    def _narrow_places(self) -> None:
        """Offer the ports and countries of the chosen feed (all feeds: all of theirs)."""
        feeds = [f for f in self._feeds if self.source in (ALL, f["id"])]
        ports = {p["unlocode"]: p for feed in feeds for p in feed["ports"]}
        self.param.port.objects = {
            "Any port": "",
            **{f"{p['name']} ({code})": code for code, p in sorted(ports.items(), key=lambda i: (i[1]["name"] or "", i[0]))},
        }
        countries = sorted({p["country_name"] for p in ports.values() if p["country_name"]})
        self.param.country.objects = {"Any country": "", **{c: c for c in countries}}
        narrowed = {}
        if self.port not in self.param.port.objects.values():
            narrowed["port"] = ""
        if self.country not in self.param.country.objects.values():
            narrowed["country"] = ""
        if narrowed:
            self.param.update(**narrowed)

    @classmethod
    def of(cls, account: Account, **params) -> "LineupFilters":
        """Filters offering the account's feeds, their ports and the taxonomy."""
        return cls(account.feeds, commodity_tree(account.context.taxonomy), **params)

    def to_args(self) -> dict[str, list[str]]:
        """The query as /v1/lineups parameters (defaults left out)."""
        args: dict[str, list[str]] = {}
        if self.source != ALL:
            args["source"] = [self.source]
        if self.port:
            args["port"] = [self.port]
        if self.country:
            args["country"] = [self.country]
        if self.port_name.strip():
            args["port_name"] = [self.port_name.strip()]
        if self.date_from is not None:
            args["from"] = [self.date_from.isoformat()]
        if self.date_to is not None:
            args["to"] = [self.date_to.isoformat()]
        if self.commodity:
            args["commodity"] = [",".join(self.commodity)]
        if self.status:
            args["status"] = [",".join(s for s in VESSEL_STATUSES if s in self.status)]
        if self.latest:
            args["latest"] = ["true"]
        if self.merge != ALL:
            args["merge"] = [self.merge]
        return args

    def url_args(self) -> dict[str, str]:
        """The page's query string: the API's parameters, and `source=all` when
        nothing narrows the rows (a bare address opens on upcoming calls)."""
        args = {name: values[0] for name, values in self.to_args().items()}
        return args or {"source": ALL}

    def set_args(self, args: Mapping[str, str], taxonomy) -> list[str]:
        """Set every filter from /v1/lineups parameters (a URL's query), the others to
        their defaults. Returns what could not be used, in words (the rest applies)."""
        values: dict[str, Any] = {name: self.param[name].default for name in _FILTERS}
        ignored = [f"“{name}” is not a filter" for name in args if name not in ADDRESS_FILTERS]
        source = args.get("source", ALL).lower()
        if source in self.param.source.objects.values():
            values["source"] = source
        else:
            ignored.append("the feed in the address is not one of yours")
        for name in ("port", "country"):
            value = args.get(name, "")
            value = value.upper() if name == "port" else value
            # The port and country lists of the chosen feed, as `_narrow_places` makes them.
            feeds = [f for f in self._feeds if values["source"] in (ALL, f["id"])]
            known = {p["unlocode"] for f in feeds for p in f["ports"]} if name == "port" else {
                p["country_name"] for f in feeds for p in f["ports"]}
            match = next((k for k in known if k and k.lower() == value.lower()), None)
            if value and match is None:
                ignored.append(f"{value} is not a {name} of your feeds")
            values[name] = match or ""
        values["port_name"] = args.get("port_name", "")
        for name, field in (("from", "date_from"), ("to", "date_to")):
            if args.get(name):
                try:
                    values[field] = dt.date.fromisoformat(args[name])
                except ValueError:
                    ignored.append(f"“{args[name]}” is not a date")
        if args.get("commodity"):
            try:
                values["commodity"] = list(taxonomy.parse_filter(args["commodity"]))
            except LineupsError as error:
                ignored.append(problem(error))
        if args.get("status"):
            values["status"], unknown = _statuses(args["status"])
            ignored += [f"“{name}” is not a vessel status (expected, anchored, berthed or departed)" for name in unknown]
        latest = args.get("latest", "false")
        values["latest"] = latest.lower() == "true"
        if latest.lower() not in ("true", "false"):
            ignored.append(f"“{latest}” is not true or false, so every call is shown, not only the latest")
        merge = args.get("merge", ALL).lower()
        values["merge"] = merge if merge in MERGE_MODES.values() else ALL
        if values["merge"] != merge:
            ignored.append(f"“{args['merge']}” is not a way of merging rows, so the feeds are merged")
        self.param.update(**values)
        return ignored

    def reset(self, first_day: dt.date | None) -> None:
        """Every filter back to its default; `first_day`: the From date. With a day,
        upcoming calls: from that day, and not departed (issue 45 item 4)."""
        upcoming = {"date_from": first_day, "status": list(NOT_DEPARTED) if first_day else []}
        self.param.update(**{**{name: self.param[name].default for name in _FILTERS}, **upcoming})

    def query(self, taxonomy) -> LineupQuery:
        """The validated query. Raises ValidationError with the API's message."""
        query, _limit, _cursor = parse_query(self.to_args(), taxonomy.parse_filter)
        return query

    def describe(self, feed_names: dict[str, str] | None = None) -> str:
        ports = {p["unlocode"]: p["name"] for feed in self._feeds for p in feed["ports"] if p.get("name")}
        return describe_filters({k: v[0] for k, v in self.to_args().items()}, feed_names, ports)


_FILTERS = ("source", "port", "country", "port_name", "date_from", "date_to", "commodity", "status", "latest", "merge")


def _statuses(text: str) -> tuple[list[str], list[str]]:
    """The vessel statuses of a `status` value of an address (any case), and the
    names in it that are none."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    return [s for s in VESSEL_STATUSES if s in {n.lower() for n in names}], [n for n in names if n.lower() not in VESSEL_STATUSES]
