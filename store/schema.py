"""The store's schema (SQLAlchemy 2), one for SQLite and PostgreSQL.

Times are stored as naive UTC `DateTime` columns on both back ends and turned into
aware UTC values at the edges (contract C1).
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
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def new_uuid() -> str:
    return str(uuid.uuid4())


class Base(DeclarativeBase):
    pass


class Port(Base):
    """The UN/LOCODE port directory shipped with the product (`store/data/ports.csv`)."""

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
    eta: Mapped[dt.datetime | None] = mapped_column(DateTime)
    etb: Mapped[dt.datetime | None] = mapped_column(DateTime)
    etd: Mapped[dt.datetime | None] = mapped_column(DateTime)
    vessel_status: Mapped[str | None] = mapped_column(String(20))
    shipper: Mapped[str | None] = mapped_column(String(200))
    receiver: Mapped[str | None] = mapped_column(String(200))
    charterer: Mapped[str | None] = mapped_column(String(200))
    operator: Mapped[str | None] = mapped_column(String(200))
    ship_agent: Mapped[str | None] = mapped_column(String(200))
    vessel_key: Mapped[str] = mapped_column(String(220))
    commodity_raw_key: Mapped[str | None] = mapped_column(String(220))
    commodity_leaf: Mapped[str | None] = mapped_column(String(200))
    content_hash: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: The feed's `data_version` at the record's last change (insert, update, commodity
    #: resolution), so that caches can load only what changed since the version they
    #: hold (`store.records.load_changed`).
    changed_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime)

    __table_args__ = (
        UniqueConstraint("feed_id", "ref", name="uq_records_feed_ref"),
        Index("ix_records_commodity_raw_key", "commodity_raw_key"),
        Index("ix_records_feed_changed", "feed_id", "changed_version"),
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
