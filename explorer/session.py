"""Who is using an explorer session, and the store they reach through it.

`ExplorerContext` is what every session of one server process shares (the
sessionmaker, the lineup service with its merge caches, the signing secrets, the
public base URL). `Account` is one signed-in buyer: every action goes through
`Account.store()`, which re-reads the API key and the buyer before doing anything,
so that a revoked key or a suspended buyer ends the session on the next action.
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from typing import Any, Iterator

import param
from sqlalchemy.orm import Session, sessionmaker

from explorer import auth
from store import accounts
from store.db import transaction
from store.errors import LineupsError
from store.feeds import feed_dict
from store.lineups import LineupService
from store.schema import Buyer
from store.taxonomy import Taxonomy, default_taxonomy


@dataclasses.dataclass(frozen=True)
class ExplorerContext:
    """The dependencies of every explorer session in one server process."""

    sessions: sessionmaker[Session]
    service: LineupService
    secrets: tuple[str, ...]
    base_url: str
    taxonomy: Taxonomy = dataclasses.field(default_factory=default_taxonomy)


class SessionLost(Exception):
    """The store no longer accepts this session (revoked key, suspended buyer)."""


def feed_list(session: Session, buyer_id: str) -> list[dict[str, Any]]:
    """The buyer's feeds as the API lists them (C7): active or trial subscriptions,
    ordered by name, each with its `subscription_status`."""
    return [
        {**feed_dict(e.feed), "subscription_status": e.status}
        for e in accounts.entitlements(session, buyer_id)
    ]


class Account(param.Parameterized):
    """One signed-in buyer of one explorer session."""

    context = param.ClassSelector(class_=ExplorerContext, constant=True, precedence=-1)
    buyer_id = param.String(default="", constant=True)
    key_id = param.String(default="", constant=True)
    buyer_name = param.String(default="", constant=True)
    feeds = param.List(default=[], item_type=dict, precedence=-1, doc="""
        The buyer's feeds when the session opened (C7 source dicts).""")
    lost = param.Boolean(default=False, doc="""
        True once the store refused the session; the app then returns to the login page.""")

    @classmethod
    def open(cls, context: ExplorerContext, identity: auth.Identity) -> "Account":
        """The account of a signed-in identity. Raises SessionLost when the store no
        longer accepts it."""
        try:
            with transaction(context.sessions) as session:
                buyer = auth.check(session, identity)
                feeds = feed_list(session, buyer.id)
        except LineupsError as error:
            raise SessionLost(error.message) from error
        return cls(
            context=context,
            buyer_id=buyer.id,
            key_id=identity.key_id,
            buyer_name=buyer.name,
            feeds=feeds,
        )

    @contextmanager
    def store(self) -> Iterator[tuple[Session, Buyer]]:
        """One transaction for one action, after re-checking the session against the
        store. Raises SessionLost, and sets `lost`, when the check fails."""
        if self.lost:
            raise SessionLost("This session has ended")
        with transaction(self.context.sessions) as session:
            try:
                buyer = auth.check(session, auth.Identity(self.buyer_id, self.key_id))
            except LineupsError as error:
                self.lost = True
                raise SessionLost(error.message) from error
            yield session, buyer

    @property
    def service(self) -> LineupService:
        return self.context.service

    @property
    def feed_names(self) -> dict[str, str]:
        return {feed["id"]: feed["name"] for feed in self.feeds}
