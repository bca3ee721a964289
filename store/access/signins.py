"""Explorer sign-ins that a logout ended (issue 17, item 5). A session cookie names its
sign-in by a random id; a logout records it here, where every server process looks
before it serves the cookie. Functions take a session and never commit."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session

from store.database.schema import EndedSignIn
from store.fields import stored_now


def end(session: Session, sign_in_id: str, keep: dt.timedelta) -> None:
    """Record that the sign-in `sign_in_id` has ended, and forget ended sign-ins
    older than `keep` (their cookies have expired)."""
    now = stored_now()
    session.execute(delete(EndedSignIn).where(EndedSignIn.ended_at < now - keep))
    if session.get(EndedSignIn, sign_in_id) is None:
        session.add(EndedSignIn(id=sign_in_id, ended_at=now))
    session.flush()


def has_ended(session: Session, sign_in_id: str) -> bool:
    """Whether a logout ended the sign-in `sign_in_id`."""
    return bool(session.scalar(select(exists().where(EndedSignIn.id == sign_in_id))))
