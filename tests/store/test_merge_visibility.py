"""Issue 19 rule 1, as a property of the store: a feed the buyer cannot see never
changes the buyer's rows. For random feeds of records (IMO numbers given or not,
names shared by two IMO numbers, "(Unspecified)" and specific iron ore, blank
commodities), adding the records of feeds the buyer does not see leaves the buyer's
rows as they were, and a later change to a feed they do see (kept views brought up to
date in part, with identities read from the store) gives the merge of their visible
records alone. On SQLite (the view upkeep and identity queries are the same SQL on
PostgreSQL, which tests/store/test_views.py covers by example)."""

from __future__ import annotations

import datetime as dt
import tempfile
from unittest import mock

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.access import accounts
from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
from store.database.schema import Buyer, Feed
from store.intake import feeds, ingest, validate
from store.merging import merge
from store.views.records import load_records
from store.views import upkeep
from store.views.lineups import Lineups
from store.query import LineupQuery

FEEDS = ("Alpha Lineups", "Bravo Port Data", "Charlie Ships")
#: (IMO, name): a name with one IMO, name-only spellings of it, and a name that a
#: second IMO also carries (rule 1 then resolves it to none).
VESSELS = (
    ("9074729", "OCEAN GRACE"), ("", "Ocean Grace"), ("", "M/V Ocean Grace"),
    ("9348247", "DAWN CAPE"), ("", "Dawn Cape"), ("9348247", "Ocean Grace"),
    ("9345934", "HARMONY PACIFIC"), ("", "Harmony Pacific"),
)
COMMODITIES = ("iron ore", "iron ore", "iron ore fines", "iron ore pellets", "steam coal", "mystery cargo", "")

_record = st.fixed_dictionaries({
    "vessel": st.sampled_from(VESSELS),
    "port_unlocode": st.sampled_from(["NLRTM", "NLRTM", "BEANR"]),
    "commodity": st.sampled_from(COMMODITIES),
    "day": st.integers(0, 16),
    "shipper": st.sampled_from(["", "", "Acme", "Beta"]),
    "quantity": st.sampled_from(["", "1000", "2500"]),
})
#: Per feed: its records (refs r0, r1, ... in list order).
_feeds = st.lists(st.lists(_record, max_size=8), min_size=3, max_size=3)


def _file(records: list[dict]) -> pd.DataFrame:
    rows = []
    for i, r in enumerate(records):
        imo, name = r["vessel"]
        eta = dt.datetime(2024, 3, 1) + dt.timedelta(days=r["day"])
        rows.append({
            "ref": f"r{i}", "port_unlocode": r["port_unlocode"], "vessel_imo": imo, "vessel_name": name,
            "commodity": r["commodity"], "eta": eta.strftime("%Y-%m-%dT%H:%M:%SZ"), "shipper": r["shipper"],
            "quantity": r["quantity"],
        })
    return pd.DataFrame(rows, columns=["ref", "port_unlocode", "vessel_imo", "vessel_name", "commodity", "eta",
                                       "shipper", "quantity"], dtype=object)


def _upsert(sessions, feed_id: str, records: list[dict]) -> None:
    rows = _file(records)
    if rows.empty:
        return
    with transaction(sessions) as session:
        clean = validate.validate_frame(rows.assign(_line=np.arange(2, len(rows) + 2)), name="feed.csv")
        ingest.upsert(session, session.get(Feed, feed_id), clean)


def _comparable(rows: pd.DataFrame) -> list[tuple]:
    columns = ("id", "vessel_key", "source_name", "vessel_imo", "vessel_name", "commodity_normalized", "quantity", "eta")
    out = []
    for values in zip(*(rows[c].astype(object) for c in columns)):
        out.append(tuple(None if pd.isna(v) else str(v) for v in values))
    return sorted(out)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_feeds, st.sets(st.integers(0, 2), min_size=1, max_size=2), st.lists(_record, min_size=1, max_size=4))
def test_a_feed_the_buyer_cannot_see_never_changes_their_rows(records, visible, revision):
    with tempfile.TemporaryDirectory() as folder, mock.patch.object(upkeep, "INCREMENTAL_SHARE", 10.0):
        sessions = make_sessionmaker(make_engine(f"sqlite:///{folder}/store.db"))
        create_schema(sessions.kw["bind"])
        with transaction(sessions) as session:
            feed_ids = [feeds.add_feed(session, name, ["NLRTM"]).id for name in FEEDS]
            buyer = accounts.add_buyer(session, "Sees some").id
            everyone = accounts.add_buyer(session, "Sees all").id
            for i, feed_id in enumerate(feed_ids):
                for who in ([buyer, everyone] if i in visible else [everyone]):
                    accounts.set_subscription(session, session.get(Buyer, who), session.get(Feed, feed_id), "active")
        lineups = Lineups(sessions)
        for i in sorted(visible):
            _upsert(sessions, feed_ids[i], records[i])
        before = _comparable(lineups.frame(buyer, LineupQuery()))
        lineups.frame(everyone, LineupQuery())  # its view exists: the ingests below keep it up to date
        for i in sorted(set(range(3)) - visible):
            _upsert(sessions, feed_ids[i], records[i])
        assert _comparable(lineups.frame(buyer, LineupQuery())) == before
        # A change to a feed the buyer sees: their view is merged again in part, with
        # the invisible feeds' records in the store.
        changed = min(visible)
        _upsert(sessions, feed_ids[changed], revision)
        with transaction(sessions) as session:
            expected = merge.merge(load_records(session, [feed_ids[i] for i in visible]), "all")
        assert _comparable(lineups.frame(buyer, LineupQuery())) == _comparable(expected)
        sessions.kw["bind"].dispose()
