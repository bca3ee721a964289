"""The service's settings: one object, read from the environment and flags.

Nothing here runs at import time; `Settings.load()` reads the environment when asked.
Secrets (contract C8, issue "secrets and settings"):
- `LINEUPS_SECRET` signs cursors, share links and explorer cookies. It may hold several
  secrets separated by commas, newest first: the first signs, all verify, so a new
  secret can be rolled in while links signed with the old one keep working.
- With the embedded SQLite default and no `LINEUPS_SECRET`, a secret is generated on
  first use and kept beside the store file (`<db file>.secret`, mode 0600).
- With any other database a missing `LINEUPS_SECRET` is a start-up error.
- A secret shorter than `MIN_SECRET_CHARS` is refused, from the environment or the
  file (issue 49 item 8: an empty file, what a crash between creating and writing it
  left, signed cookies with ''). The file is written whole or not at all: to a
  temporary file beside it, then renamed into place.

Read replicas (`LINEUPS_DB_REPLICAS`, comma-separated PostgreSQL URLs) take the API's
pure reads; everything that writes or must be fresh stays on `LINEUPS_DB` (see
`store.database.db.Reads` and docs/deploying.md).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

DEFAULT_DB = "sqlite:///lineups.db"
#: The shortest signing secret accepted (a generated one has 64 characters).
MIN_SECRET_CHARS = 32


class SettingsError(Exception):
    """The configuration cannot work; the message says what to set."""


@dataclasses.dataclass(frozen=True)
class Settings:
    db_url: str = DEFAULT_DB
    #: PostgreSQL schema to use instead of `public` (tests give each run its own).
    db_schema: str | None = None
    #: URLs of read replicas of `db_url` (PostgreSQL streaming replicas) for the API's
    #: pure reads; empty: everything reads the primary.
    db_replicas: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    base_url: str = "http://127.0.0.1:8000"
    #: The public address as given by a flag or `LINEUPS_BASE_URL` (None: neither),
    #: which wins over the store's base-url setting (`store.database.config`).
    given_base_url: str | None = None
    redis_url: str | None = None
    #: Requests per API key (or share link, or client address) per rolling minute
    #: (C5: 100). Settable for load tests; the contract's products use the default.
    rate_limit: int = 100
    #: Take the client address from X-Real-IP / X-Forwarded-For (set behind a proxy
    #: that writes them; never when clients reach the server directly).
    trust_proxy: bool = False
    share_ceiling: int = 100_000
    statement_timeout_ms: int = 30_000

    @classmethod
    def load(cls, env: os._Environ | dict | None = None, **overrides) -> "Settings":
        """Settings from the environment (`LINEUPS_*`), with non-None `overrides` (the
        command line's flags) taking precedence."""
        env = os.environ if env is None else env
        values = {
            "db_url": env.get("LINEUPS_DB") or DEFAULT_DB,
            "db_schema": env.get("LINEUPS_DB_SCHEMA") or None,
            "db_replicas": _listed(env.get("LINEUPS_DB_REPLICAS")),
            "base_url": env.get("LINEUPS_BASE_URL") or cls.base_url,
            "redis_url": env.get("LINEUPS_REDIS") or None,
            "rate_limit": int(env.get("LINEUPS_RATE_LIMIT") or cls.rate_limit),
            "trust_proxy": (env.get("LINEUPS_TRUST_PROXY") or "").strip().lower() in ("1", "true", "yes"),
            "share_ceiling": int(env.get("LINEUPS_SHARE_CEILING") or cls.share_ceiling),
        }
        values["secrets"] = _listed(env.get("LINEUPS_SECRET"))
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["base_url"] = values["base_url"].rstrip("/")
        if overrides.get("base_url") or env.get("LINEUPS_BASE_URL"):
            values["given_base_url"] = values["base_url"]
        return cls(**values)

    @property
    def is_sqlite(self) -> bool:
        return self.db_url.startswith("sqlite")

    def check_replicas(self) -> None:
        """Raise SettingsError when replicas are configured that cannot work: a replica
        is a PostgreSQL URL, and replicates a PostgreSQL primary."""
        for url in self.db_replicas:
            if not url.startswith("postgresql"):
                scheme = url.split(":", 1)[0]
                raise SettingsError(f"A read replica must be a PostgreSQL URL (postgresql+psycopg://…), not {scheme}:…")
        if self.db_replicas and not self.db_url.startswith("postgresql"):
            raise SettingsError("Read replicas (LINEUPS_DB_REPLICAS, --db-replica) need a PostgreSQL store (LINEUPS_DB)")

    def signing_secrets(self) -> tuple[str, ...]:
        """The secrets, newest first. Generates and keeps one beside an embedded SQLite
        store when none is configured. Raises SettingsError for other databases."""
        if self.secrets:
            if any(len(secret) < MIN_SECRET_CHARS for secret in self.secrets):
                raise SettingsError(
                    f"A signing secret in LINEUPS_SECRET is shorter than {MIN_SECRET_CHARS} characters. {_HOW_TO_MAKE}"
                )
            return self.secrets
        path = sqlite_path(self.db_url)
        if path is None:
            if self.is_sqlite:  # in-memory SQLite: a secret for this process only
                return (_process_secret(),)
            raise SettingsError(
                "LINEUPS_SECRET is not set. With a database other than the embedded SQLite "
                f"file, set LINEUPS_SECRET to a long random string. {_HOW_TO_MAKE}"
            )
        return (_secret_beside(path),)


def _listed(raw: str | None) -> tuple[str, ...]:
    """The non-blank items of a comma-separated setting."""
    return tuple(item.strip() for item in (raw or "").split(",") if item.strip())


def sqlite_path(db_url: str) -> Path | None:
    """The file of a `sqlite:///FILE` URL; None for other databases and in-memory SQLite."""
    prefix = "sqlite:///"
    if not db_url.startswith(prefix):
        return None
    name = db_url[len(prefix):].split("?", 1)[0]
    if not name or name == ":memory:":
        return None
    return Path(name)


_HOW_TO_MAKE = (
    f"Use at least {MIN_SECRET_CHARS} random characters, for example the output of "
    "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`."
)


def _secret_beside(db_path: Path) -> str:
    """The secret kept in `<db file>.secret`, made on first use. Raises SettingsError
    when the file holds less than a secret (never signs with it)."""
    secret_file = db_path.with_name(db_path.name + ".secret")
    if not secret_file.exists():
        _write_secret(secret_file, secrets.token_urlsafe(48))
    value = secret_file.read_text().strip()
    if len(value) < MIN_SECRET_CHARS:
        raise SettingsError(
            f"The signing secret in {secret_file} is shorter than {MIN_SECRET_CHARS} characters "
            f"({len(value)}). Delete the file to have a new one made (signed-in explorer sessions, "
            f"cursors and share links signed with the old one stop working), or set LINEUPS_SECRET. {_HOW_TO_MAKE}"
        )
    return value


def _write_secret(secret_file: Path, value: str) -> None:
    """Write `value` to `secret_file` (mode 0600) whole or not at all: a temporary
    file beside it, flushed to disk, then linked into place; when another process
    made the file first, its secret stands."""
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    partial = secret_file.with_name(f"{secret_file.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(value + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(partial, secret_file)  # fails if it exists: never replaces another process's secret
        except FileExistsError:
            pass
    finally:
        partial.unlink(missing_ok=True)


_PROCESS_SECRET: list[str] = []


def _process_secret() -> str:
    if not _PROCESS_SECRET:
        _PROCESS_SECRET.append(secrets.token_urlsafe(48))
    return _PROCESS_SECRET[0]
