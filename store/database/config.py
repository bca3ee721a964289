"""Settings kept in the store (issue 18.6): what every command and every server
process must agree on, set once by the operator (`lineups config set NAME VALUE`).

- `base-url`: the public address of the service (`https://lineups.example.com`),
  which share-link URLs begin with. Where it comes from, first found wins: a command's
  `--base-url` flag, the environment's `LINEUPS_BASE_URL`, this setting, and for
  `lineups serve` the address it listens on (`http://HOST:PORT`). `lineups serve
  --base-url URL` also stores URL here, so that the commands run later print the
  links the server answers.

Functions take a session and neither commit nor close it.
"""

from __future__ import annotations

from typing import Callable
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.errors import ValidationError
from store.fields import stored_now
from store.names import suggestions
from store.database.schema import ServiceSetting

BASE_URL = "base-url"


def check_base_url(value: str) -> str:
    """`value` as a base URL (no trailing slash). Raises ValidationError unless it is
    an http(s) URL with a host and no query or fragment."""
    text = value.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValidationError.parameter(
            BASE_URL, f"{value!r} is not a base URL such as https://lineups.example.com (http or https, a host, no query)"
        )
    return text


def public_base_url(given: str | None, stored: Callable[[], str | None], default: str) -> str:
    """The public address, first found wins (the module's docstring): `given` (a
    command's --base-url, else $LINEUPS_BASE_URL: `Settings.given_base_url`), else
    `stored()` (this setting, read only when needed), else `default`; without a
    trailing slash. Every command and server process finds it here."""
    return (given or stored() or default).rstrip("/")


#: Each setting's name and the function that checks and normalises its value.
SETTINGS: dict[str, Callable[[str], str]] = {BASE_URL: check_base_url}


def known(name: str) -> str:
    """`name` when it is a setting. Raises ValidationError naming the settings."""
    if name not in SETTINGS:
        near = suggestions(name, list(SETTINGS))
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ValidationError.parameter("name", f"{name!r} is not a setting (known: {', '.join(SETTINGS)}){hint}")
    return name


def get(session: Session, name: str) -> str | None:
    """The stored value of setting `name`, or None when it is not set."""
    return session.scalar(select(ServiceSetting.value).where(ServiceSetting.name == known(name)))


def put(session: Session, name: str, value: str) -> str:
    """Store setting `name`; returns the value as stored. Raises ValidationError for
    an unknown setting or a value outside its rule."""
    value = SETTINGS[known(name)](value)
    row = session.get(ServiceSetting, name)
    now = stored_now()
    if row is None:
        session.add(ServiceSetting(name=name, value=value, changed_at=now))
    elif row.value != value:
        row.value, row.changed_at = value, now
    session.flush()
    return value


def remove(session: Session, name: str) -> None:
    """Forget setting `name` (its default applies again)."""
    row = session.get(ServiceSetting, known(name))
    if row is not None:
        session.delete(row)
        session.flush()


def every(session: Session) -> dict[str, str | None]:
    """Every setting with its stored value (None: not set)."""
    stored = dict(session.execute(select(ServiceSetting.name, ServiceSetting.value)).all())
    return {name: stored.get(name) for name in SETTINGS}
