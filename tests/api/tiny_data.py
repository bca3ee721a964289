"""Hand-made lineup data for exact assertions (the `tiny` fixtures of conftest.py).

Feed A (Santos and Paranagua, 5 records: A1 and A5 are two calls of one vessel at
Santos 46 days apart, A3 has no date and an unresolved commodity, A4 no commodity),
feed B (Santos, 1 record reporting A1's call), feed C (cancelled), feed D (no
subscription); buyer "Tiny Buyer" (A active, B trial, C cancelled), a suspended
buyer, and a revoked key. Every record's created_at is FIXED_TIME.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
from sqlalchemy import update

from store.database.db import transaction

FIXED_TIME = dt.datetime(2024, 2, 1, 12, 0, 0)


def add_feed(session, name: str, ports: list[str], **kwargs):
    from store.intake import feeds

    return feeds.add_feed(session, name, ports, **kwargs)


def add_records(session, feed, rows: list[dict[str, Any]], created_at: dt.datetime = FIXED_TIME):
    """Ingest hand-made rows (feed-file columns as text) into `feed`, with a fixed
    `created_at` so that output is exact."""
    from store.intake import ingest, validate
    from store.database.schema import Record

    frame = pd.DataFrame(rows).astype(object)
    frame = frame.where(frame.notna(), None)
    frame["_line"] = range(2, len(frame) + 2)
    clean = validate.validate_frame(frame, name=feed.name)
    ingest.upsert(session, feed, clean)
    session.execute(update(Record).where(Record.feed_id == feed.id).values(created_at=created_at))


def new_buyer(session, name: str, subscriptions: dict) -> tuple[Any, str]:
    """A buyer with a key and subscriptions `{feed: status}`; returns (buyer, key)."""
    from store.access import accounts

    buyer = accounts.add_buyer(session, name)
    key, _ = accounts.create_key(session, buyer)
    for feed, status in subscriptions.items():
        accounts.set_subscription(session, buyer, feed, status)
    return buyer, key


TINY_ROWS_A = [
    {
        "ref": "A1", "port_unlocode": "BRSSZ", "vessel_imo": "9321483", "vessel_name": "MV Ocean Star",
        "vessel_type": "Bulk Carrier", "dwt": "82000", "operation": "load", "commodity": "soybeans",
        "quantity": "65000", "quantity_unit": "MT", "eta": "2024-03-05T06:00:00Z", "etb": "2024-03-06T12:00:00Z",
        "etd": "2024-03-08T00:00:00Z", "vessel_status": "expected", "shipper": "=HYPERLINK(\"x\")",
        "receiver": "Cargill, Inc.", "charterer": "Bunge", "operator": "+Oldendorff", "ship_agent": "-Wilson Sons",
        "berth_terminal": "@Berth 1", "updated_at": "2024-02-10T08:00:00Z",
    },
    {
        "ref": "A2", "port_unlocode": "BRSSZ", "vessel_name": "Golden Dawn", "vessel_type": "Tanker",
        "operation": "disch", "commodity": "Diesel", "quantity": "40000.5", "quantity_unit": "MT",
        "eta": "2024-03-20T00:00:00Z", "vessel_status": "anchored", "shipper": "Petrobras",
        "receiver": "Say \"hi\"", "charterer": "N/A", "operator": "TBC", "ship_agent": "Line1\nLine2",
        "updated_at": "2024-02-11T09:30:00Z",
    },
    {
        "ref": "A3", "port_unlocode": "BRPNG", "vessel_imo": "9321483", "vessel_name": "Ocean Star",
        "operation": "load", "commodity": "OUTROS", "vessel_status": "expected",
        "updated_at": "2024-02-12T10:00:00Z",
    },
    {
        "ref": "A4", "port_unlocode": "BRSSZ", "vessel_name": "No Cargo", "commodity": "", "eta": "2024-03-02T00:00:00Z",
        "updated_at": "2024-02-13T00:00:00Z",
    },
    {
        "ref": "A5", "port_unlocode": "BRSSZ", "vessel_imo": "9321483", "vessel_name": "Ocean Star",
        "commodity": "Soybeans", "quantity": "1234.25", "quantity_unit": "MT", "eta": "2024-04-20T00:00:00Z",
        "vessel_status": "expected", "receiver": "Cargill, Inc.", "updated_at": "2024-02-20T00:00:00Z",
    },
]
TINY_ROWS_B = [
    {
        "ref": "B1", "port_unlocode": "BRSSZ", "vessel_imo": "9321483", "vessel_name": "OCEAN STAR",
        "commodity": "Soja", "quantity": "64000", "quantity_unit": "MT", "eta": "2024-03-06T00:00:00Z",
        "vessel_status": "berthed", "receiver": "Cargill, Inc.", "updated_at": "2024-02-15T00:00:00Z",
    },
]


def load_tiny(sessions) -> dict:
    """Load the hand-made data (see the module docstring) into the store of
    `sessions`; returns the feed ids ("a".."d"), the buyer id and the keys."""
    from store.access import accounts

    with transaction(sessions) as session:
        feed_a = add_feed(session, "Alpha Santos Lineup", ["BRSSZ", "BRPNG"], frequency="daily",
                          feed_type="agency", coverage_rating=4.5, commodity_rating=4.0, commercial_rating=3.5)
        feed_b = add_feed(session, "Bravo Santos Reports", ["BRSSZ"], frequency="weekly")
        feed_c = add_feed(session, "Charlie Cancelled", ["NLRTM"])
        feed_d = add_feed(session, "Delta Unsubscribed", ["SGSIN"])
        add_records(session, feed_a, TINY_ROWS_A)
        add_records(session, feed_b, TINY_ROWS_B)
        add_records(session, feed_c, [{"ref": "C1", "port_unlocode": "NLRTM", "vessel_name": "Rotterdam Express",
                                       "commodity": "crude oil", "eta": "2024-03-03T00:00:00Z"}])
        buyer, key = new_buyer(session, "Tiny Buyer", {feed_a: "active", feed_b: "trial", feed_c: "cancelled"})
        suspended, suspended_key = new_buyer(session, "Suspended Buyer", {feed_a: "active"})
        accounts.set_buyer_status(session, suspended, "suspended")
        revoked_key, revoked_row = accounts.create_key(session, buyer)
        accounts.revoke_key(session, revoked_row)
        return {
            "buyer_id": buyer.id, "key": key, "suspended_key": suspended_key, "revoked_key": revoked_key,
            "a": feed_a.id, "b": feed_b.id, "c": feed_c.id, "d": feed_d.id,
        }
