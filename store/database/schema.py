"""The store's schema (SQLAlchemy 2), one for SQLite and PostgreSQL.

Times are naive UTC `DateTime` values to the code on both back ends, turned into
aware UTC values at the edges (contract C1). PostgreSQL keeps them as timestamps;
SQLite as ISO text, but for the records' times (`RecordTime`), which it keeps as
integers.
"""

from __future__ import annotations

import datetime as dt
import uuid

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeEngine

_EPOCH = dt.datetime(1970, 1, 1)


class _Nanoseconds(TypeEngine):
    """A SQLite column declared DATETIME whose values are integers, as they come."""

    __visit_name__ = "DATETIME"


class RecordTime(TypeDecorator):
    """A record's time: a naive UTC datetime to the code, a timestamp on PostgreSQL,
    and on SQLite an integer, nanoseconds since the epoch (whole microseconds, as a
    datetime holds), in a column that its DDL still declares DATETIME. SQLite's
    DateTime is ISO text, 26 bytes a value where the integer takes 8: five times a
    record, written by every ingest and parsed by every merge's load. 1,000,000
    records into a fresh store: 684 -> 594 MiB, the ingest 31.5 -> 28.1 s, loading
    them all for a merge 19.4 -> 17.2 s (means of six alternating pairs, a slow hour,
    2026-11-29). Migration 0014 turned the kept text into integers."""

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect):
        return _Nanoseconds() if dialect.name == "sqlite" else dialect.type_descriptor(DateTime())

    def process_bind_param(self, value, dialect):
        if value is None or dialect.name != "sqlite":
            return value
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return (value - _EPOCH) // dt.timedelta(microseconds=1) * 1000

    def process_result_value(self, value, dialect):
        if value is None or dialect.name != "sqlite":
            return value
        return _EPOCH + dt.timedelta(microseconds=int(value) // 1000)


def new_uuid() -> str:
    return str(uuid.uuid4())


class Base(DeclarativeBase):
    pass


class Port(Base):
    """The UN/LOCODE port directory shipped with the product (`store/reference/data/ports.csv`)."""

    __tablename__ = "ports"
    unlocode: Mapped[str] = mapped_column(String(5), primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    country_code: Mapped[str] = mapped_column(String(2))
    country_name: Mapped[str] = mapped_column(String(120))
    latitude: Mapped[float | None] = mapped_column(Float)
    longitude: Mapped[float | None] = mapped_column(Float)
    timezone: Mapped[str | None] = mapped_column(String(64))


class Feed(Base):
    """A data feed (source) that buyers subscribe to."""

    __tablename__ = "feeds"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uuid)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    frequency: Mapped[str | None] = mapped_column(String(50))
    feed_type: Mapped[str | None] = mapped_column(String(50))
    coverage_rating: Mapped[float | None] = mapped_column(Float)
    commodity_rating: Mapped[float | None] = mapped_column(Float)
    commercial_rating: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    #: Bumped by every change to the feed's records; the merge cache keys on it.
    data_version: Mapped[int] = mapped_column(Integer, default=0)
    ports: Mapped[list["FeedPort"]] = relationship(
        order_by="FeedPort.position", cascade="all, delete-orphan", lazy="selectin"
    )


class FeedPort(Base):
    __tablename__ = "feed_ports"
    feed_id: Mapped[str] = mapped_column(ForeignKey("feeds.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    unlocode: Mapped[str] = mapped_column(ForeignKey("ports.unlocode"))


class Buyer(Base):
    __tablename__ = "buyers"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uuid)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    status: Mapped[str] = mapped_column(String(20), default="active")  # active | suspended
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)


class ApiKey(Base):
    """An API key, kept only as its SHA-256 hash and a short display prefix (C5)."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uuid)
    buyer_id: Mapped[str] = mapped_column(ForeignKey("buyers.id"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime)


class Subscription(Base):
    __tablename__ = "subscriptions"
    buyer_id: Mapped[str] = mapped_column(ForeignKey("buyers.id"), primary_key=True)
    feed_id: Mapped[str] = mapped_column(ForeignKey("feeds.id"), primary_key=True)
    status: Mapped[str] = mapped_column(String(20))  # active | trial | cancelled
    changed_at: Mapped[dt.datetime] = mapped_column(DateTime)


class BuyerRequest(Base):
    """A buyer whose view wants building or whose wanted state waits to take effect:
    the builder's to-do (`store.views.pending`), one row a buyer, gone once they are
    switched. `wanted_status` is "active" while a resume waits for the view."""

    __tablename__ = "buyer_requests"
    buyer_id: Mapped[str] = mapped_column(ForeignKey("buyers.id"), primary_key=True)
    wanted_status: Mapped[str | None] = mapped_column(String(20))
    requested_at: Mapped[dt.datetime] = mapped_column(DateTime)


class SubscriptionRequest(Base):
    """A subscription status asked for that gives the buyer a feed they cannot read
    yet: it waits for the view of the feeds they will see, and then takes effect
    with the buyer's other waiting changes at once (`store.views.pending.switch`)."""

    __tablename__ = "subscription_requests"
    buyer_id: Mapped[str] = mapped_column(ForeignKey("buyers.id"), primary_key=True)
    feed_id: Mapped[str] = mapped_column(ForeignKey("feeds.id"), primary_key=True)
    status: Mapped[str] = mapped_column(String(20))  # active | trial
    requested_at: Mapped[dt.datetime] = mapped_column(DateTime)


class Record(Base):
    """A lineup record as a feed reported it: unique per (feed, ref), raw fields as
    ingested (blanks stored as NULL, enumerations in the seed's spelling), plus the
    derived vessel key and commodity resolution."""

    __tablename__ = "records"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    feed_id: Mapped[str] = mapped_column(ForeignKey("feeds.id"))
    ref: Mapped[str] = mapped_column(String(200))
    port_unlocode: Mapped[str] = mapped_column(String(5))
    port_name: Mapped[str | None] = mapped_column(String(200))
    country_name: Mapped[str | None] = mapped_column(String(200))
    berth_terminal: Mapped[str | None] = mapped_column(String(200))
    vessel_imo: Mapped[str | None] = mapped_column(String(7))
    vessel_name: Mapped[str | None] = mapped_column(String(200))
    vessel_type: Mapped[str | None] = mapped_column(String(100))
    dwt: Mapped[int | None] = mapped_column(Integer)
    operation: Mapped[str | None] = mapped_column(String(20))
    commodity: Mapped[str | None] = mapped_column(String(200))
    quantity: Mapped[float | None] = mapped_column(Float)
    quantity_unit: Mapped[str | None] = mapped_column(String(10))
    eta: Mapped[dt.datetime | None] = mapped_column(RecordTime)
    etb: Mapped[dt.datetime | None] = mapped_column(RecordTime)
    etd: Mapped[dt.datetime | None] = mapped_column(RecordTime)
    vessel_status: Mapped[str | None] = mapped_column(String(20))
    shipper: Mapped[str | None] = mapped_column(String(200))
    receiver: Mapped[str | None] = mapped_column(String(200))
    charterer: Mapped[str | None] = mapped_column(String(200))
    operator: Mapped[str | None] = mapped_column(String(200))
    ship_agent: Mapped[str | None] = mapped_column(String(200))
    vessel_key: Mapped[str] = mapped_column(String(220))
    #: `NAME:` + the normalised vessel name (C2.2), also beside an IMO number: the
    #: kept views find the IMO numbers a name carries by it (issue 19 rule 1).
    name_key: Mapped[str | None] = mapped_column(String(210))
    commodity_raw_key: Mapped[str | None] = mapped_column(String(220))
    commodity_leaf: Mapped[str | None] = mapped_column(String(200))
    content_hash: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[dt.datetime] = mapped_column(RecordTime)
    updated_at: Mapped[dt.datetime] = mapped_column(RecordTime)

    __table_args__ = (
        UniqueConstraint("feed_id", "ref", name="uq_records_feed_ref"),
        Index("ix_records_commodity_raw_key", "commodity_raw_key"),
        # Covering for the upkeep's lookups (`store.views.records`: names_carried,
        # name_ports, identity_rows) and the (vessel, port) pairs' records; led by the
        # key looked up, the feed beside it, so that a key is one probe whatever the
        # number of feeds (migrations 0007, 0013).
        Index("ix_records_vessel", "vessel_key", "port_unlocode", "feed_id", "name_key", "commodity"),
        Index("ix_records_name", "name_key", "vessel_key", "feed_id", "commodity"),
    )


class RecordRevision(Base):
    """The previous version of a record, kept whenever an ingest changes it, so that
    ETA slips and other revisions can be shown. Nothing is ever lost."""

    __tablename__ = "record_revisions"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    record_id: Mapped[int] = mapped_column(ForeignKey("records.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    content: Mapped[dict] = mapped_column(JSON)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime)
    replaced_at: Mapped[dt.datetime] = mapped_column(DateTime)


class EndedSignIn(Base):
    """An explorer sign-in that a logout ended (issue 17): its cookie opens nothing
    any more, in every server process, after a restart too. Kept until the cookie
    would have expired anyway."""

    __tablename__ = "ended_sign_ins"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    ended_at: Mapped[dt.datetime] = mapped_column(DateTime, index=True)


class CommodityMapping(Base):
    """An operator's mapping of a raw commodity string to a taxonomy leaf (C6)."""

    __tablename__ = "commodity_mappings"
    raw_key: Mapped[str] = mapped_column(String(220), primary_key=True)
    raw: Mapped[str] = mapped_column(String(200))
    leaf_id: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)


class ShareLink(Base):
    """A buyer's share link: a frozen /v1/lineups query (C8)."""

    __tablename__ = "share_links"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uuid)
    buyer_id: Mapped[str] = mapped_column(ForeignKey("buyers.id"), index=True)
    filters: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    use_count: Mapped[int] = mapped_column(Integer, default=0)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    label: Mapped[str | None] = mapped_column(Text)


# ---------------------------------------------------------------- merged views
# The read path (issue 15): merged rows are data, kept in the database, not a cache of
# each server process. See docs/architecture.md and `store.views`.

#: Collation of row ids: byte order on every back end, so that the C3 order (then id
#: ascending) is the same in SQL as in Python.
_ID = String(24).with_variant(String(24, collation="C"), "postgresql")


class MergedView(Base):
    """One kept merge: the rows of `mode` ("all" or "by_source", C2.6) over the
    records of the feeds `feeds`. An `all` view holds one visible feed set (a
    buyer's, or one feed with `source`); the one `by_source` view holds every feed's
    own rows, of which a buyer reads their visible feeds'. `versions` are the feeds'
    `data_version`s the rows reflect: a view whose versions are the feeds' current
    ones is current; another is brought up to date before it is read."""

    __tablename__ = "merged_views"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    mode: Mapped[str] = mapped_column(String(10))
    #: SHA-256 of the sorted feed ids: the view's identity with `mode`.
    feed_set: Mapped[str] = mapped_column(String(64))
    feeds: Mapped[list] = mapped_column(JSON)
    versions: Mapped[dict] = mapped_column(JSON, default=dict)
    #: "building" until its first build commits, then "ready".
    state: Mapped[str] = mapped_column(String(10), default="building")
    #: The longest schedule span (latest minus earliest of eta/etb/etd, ns) of any row
    #: it has held: bounds the index range of a date filter (C3).
    max_span: Mapped[int] = mapped_column(BigInteger, default=0)
    row_count: Mapped[int] = mapped_column(Integer, default=0)
    built_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    #: When no buyer could read it any longer; it is dropped after the retention.
    unused_since: Mapped[dt.datetime | None] = mapped_column(DateTime)
    #: The view's own sequence number: bumped by every write that changes its rows,
    #: under the lock that write holds on the view, so that the order of its
    #: `view_changes` is the order of their commits (issue 46's change feed).
    seq: Mapped[int] = mapped_column(BigInteger, default=0)
    #: Random, drawn anew when the view is made and whenever its rows are written
    #: whole: a change-feed cursor of another generation has expired (ids of dropped
    #: views can come back on SQLite).
    generation: Mapped[str] = mapped_column(String(32), default=lambda: uuid.uuid4().hex)

    __table_args__ = (UniqueConstraint("mode", "feed_set", name="uq_merged_views_mode_set"),)


class ViewRead(Base):
    """When a buyer last read a kept view (noted off the request path,
    `store.access.usage`). A view with no row was never read: it is dropped as soon
    as no buyer can read it (`store.views.builds.prune`)."""

    __tablename__ = "view_reads"
    #: No foreign key: its check would lock the view's row against `prune`'s lock of
    #: it while the noting transaction holds this row (a deadlock on PostgreSQL).
    view_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    read_at: Mapped[dt.datetime] = mapped_column(DateTime)


class MergedRow(Base):
    """A merged row of a view: the C1 fields, times as int64 ns since the epoch (UTC),
    plus what filters, the C3 order and `latest` need. Keyed for keyset pages by
    (view, sort_key, id): sort_key is combined_date in ns, or the largest int64 for a
    row without a date (C3: dateless rows last)."""

    __tablename__ = "merged_rows"
    view_id: Mapped[int] = mapped_column(ForeignKey("merged_views.id", ondelete="CASCADE"), primary_key=True)
    sort_key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    source_id: Mapped[str] = mapped_column(Text)
    source_name: Mapped[str] = mapped_column(Text)
    port_unlocode: Mapped[str] = mapped_column(String(5))
    port_name: Mapped[str | None] = mapped_column(String(200))
    country_name: Mapped[str | None] = mapped_column(String(200))
    berth_terminal: Mapped[str | None] = mapped_column(String(200))
    vessel_imo: Mapped[str | None] = mapped_column(String(7))
    vessel_name: Mapped[str | None] = mapped_column(String(200))
    vessel_type: Mapped[str | None] = mapped_column(String(100))
    dwt: Mapped[int | None] = mapped_column(BigInteger)
    operation: Mapped[str | None] = mapped_column(String(20))
    commodity: Mapped[str | None] = mapped_column(String(200))
    commodity_normalized: Mapped[str | None] = mapped_column(String(200))
    commodity_normalized_group: Mapped[str | None] = mapped_column(String(200))
    commodity_normalized_subgroup: Mapped[str | None] = mapped_column(String(200))
    quantity: Mapped[float | None] = mapped_column(Float)
    quantity_unit: Mapped[str | None] = mapped_column(String(10))
    eta: Mapped[int | None] = mapped_column(BigInteger)
    etb: Mapped[int | None] = mapped_column(BigInteger)
    etd: Mapped[int | None] = mapped_column(BigInteger)
    combined_date: Mapped[int | None] = mapped_column(BigInteger)
    vessel_status: Mapped[str | None] = mapped_column(String(20))
    shipper: Mapped[str | None] = mapped_column(String(200))
    receiver: Mapped[str | None] = mapped_column(String(200))
    charterer: Mapped[str | None] = mapped_column(String(200))
    operator: Mapped[str | None] = mapped_column(String(200))
    ship_agent: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    #: The merge key's parts (C2.2): provenance reads the records of one key. A blank
    #: vessel key (C2.3: the record merges with nothing) is kept as "", so that rows
    #: without one compare equal, as `latest` wants (C3).
    vessel_key: Mapped[str] = mapped_column(String(220))
    commodity_key: Mapped[str] = mapped_column(String(220))
    #: The latest of the merged eta/etb/etd (ns): with combined_date, the schedule span
    #: that `from`/`to` overlap (C3).
    span_end: Mapped[int | None] = mapped_column(BigInteger)
    #: country_name and port_name folded (case and spacing) for the C3 filters.
    country_key: Mapped[str | None] = mapped_column(String(200))
    port_name_key: Mapped[str | None] = mapped_column(String(200))
    members: Mapped[int] = mapped_column(Integer)
    #: 1 for the row that C3's `latest` keeps of its (vessel key, port) among all the
    #: view's rows: the latest combined_date (any over none), then updated_at, then
    #: the lowest id. With no filter, or only `port`, `latest` is these rows.
    is_top: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_merged_rows_port", "view_id", "port_unlocode", "sort_key", "id"),
        Index("ix_merged_rows_country", "view_id", "country_key", "sort_key", "id"),
        Index("ix_merged_rows_commodity", "view_id", "commodity_normalized", "sort_key", "id"),
        # A port and a commodity rare there: their own range, not the port's or the
        # commodity's walked row by row (migration 0011).
        Index("ix_merged_rows_port_commodity", "view_id", "port_unlocode", "commodity_normalized", "sort_key", "id"),
        # With the feed: the `by_source` view's upkeep reads one feed's rows of a pair,
        # and `latest` probes a pair's rows of the reader's feeds, in the index.
        Index("ix_merged_rows_vessel", "view_id", "vessel_key", "port_unlocode", "source_id"),
        Index("ix_merged_rows_top", "view_id", "is_top", "sort_key", "id"),
        # The first view's count: the calls not departed from today on (migration 0017).
        Index("ix_merged_rows_status", "view_id", "vessel_status", "sort_key", "id"),
        {"sqlite_with_rowid": False},
    )


class VesselChange(Base):
    """Which (vessel key, port) pairs (C2.2) a change of a feed's records touched, per
    version of the feed's data: a kept view merges again only the rows of these
    pairs. A row with no vessel key says "too many to list": views are merged
    afresh."""

    __tablename__ = "vessel_changes"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    feed_id: Mapped[str] = mapped_column(ForeignKey("feeds.id"))
    version: Mapped[int] = mapped_column(Integer)
    vessel_key: Mapped[str | None] = mapped_column(String(220))
    port_unlocode: Mapped[str | None] = mapped_column(String(5))

    __table_args__ = (Index("ix_vessel_changes_feed_version", "feed_id", "version"),)


class ViewChange(Base):
    """What one write of a view changed (`store.views.changes`), under the view's
    sequence number `seq`: a (vessel key, port) pair whose rows were written
    (`row_id` None), or the id of a row that left the view (`row_id`, with its
    pair); in the `by_source` view, of the feed `source_id` (else ""). A pair with
    `vessel_key` None says "the feed's rows were written whole": cursors of that feed
    that are older have expired. Kept for `changes.RETENTION`."""

    __tablename__ = "view_changes"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    view_id: Mapped[int] = mapped_column(ForeignKey("merged_views.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    source_id: Mapped[str] = mapped_column(String(36), default="")
    vessel_key: Mapped[str | None] = mapped_column(String(220))
    port_unlocode: Mapped[str | None] = mapped_column(String(5))
    row_id: Mapped[str | None] = mapped_column(_ID)
    noted_at: Mapped[dt.datetime] = mapped_column(DateTime)

    __table_args__ = (Index("ix_view_changes_view_seq", "view_id", "seq"),)


class ServiceSetting(Base):
    """A setting every command and server process shares (`store.database.config`): the public
    base URL of share links, say."""

    __tablename__ = "service_settings"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    changed_at: Mapped[dt.datetime] = mapped_column(DateTime)
