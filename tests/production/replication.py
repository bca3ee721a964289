"""PostgreSQL servers owned by the test run: a primary with a real streaming replica
(`PostgresPair`), and one server to stop and start at will (`OwnPostgres`).

The shared test server (127.0.0.1:5432) does not accept replication connections, and
its configuration is not the tests' to change. So the replica tests make their own
pair: `initdb` a primary into a temporary folder owned by the `postgres` OS user,
start it on a free port, `pg_basebackup -R` it into a standby, and start that on
another port (about two seconds in all). A test that stops its database (the restart
test) makes its own server the same way, never touching the shared one (issue 16
item 17). `LINEUPS_TEST_PG_BIN` names the folder of
the PostgreSQL programs (default: Debian's for PostgreSQL 15, else `pg_config`'s).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.waiting import PATIENCE_S

#: Quick and small: these clusters hold a few test rows and are thrown away.
SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c synchronous_commit=off "
    "-c shared_buffers=16MB -c max_connections=60"
)


def pg_bin() -> Path:
    """The folder of initdb, pg_ctl and pg_basebackup."""
    configured = os.environ.get("LINEUPS_TEST_PG_BIN")
    if configured:
        return Path(configured)
    debian = Path("/usr/lib/postgresql/15/bin")
    if (debian / "initdb").exists():
        return debian
    found = shutil.which("pg_config")
    if found is None:
        raise FileNotFoundError("no PostgreSQL programs (set LINEUPS_TEST_PG_BIN)")
    return Path(subprocess.run([found, "--bindir"], capture_output=True, text=True, check=True).stdout.strip())


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Programs:
    """initdb and pg_ctl on clusters in a temporary folder of their own."""

    def __init__(self, prefix: str):
        self.bin = pg_bin()
        # PostgreSQL refuses to run as root: as root, run its programs as `postgres`.
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.folder = Path(tempfile.mkdtemp(prefix=prefix))
        if self._as:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run([*self._as, str(self.bin / program), *args], check=True, capture_output=True, timeout=60)

    def _initdb(self, name: str) -> None:
        self._run("initdb", "-D", str(self.folder / name), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")

    def _pg_ctl(self, name: str, action: str, port: int | None = None, mode: str = "fast") -> None:
        args = ["-D", str(self.folder / name), "-w", "-t", "30"]
        if action == "start":
            args += ["-l", str(self.folder / f"{name}.log"), "-o", f"-p {port} -k {self.folder} {SERVER_OPTIONS}"]
        else:
            args += ["-m", mode]
        self._run("pg_ctl", *args, action)


class OwnPostgres(_Programs):
    """One PostgreSQL server on a free local port, made by `start` and stopped and
    started again at will; `remove` stops it and deletes its files."""

    def __init__(self):
        super().__init__("lineups-pg-")
        self.port = free_port()
        self.running = False

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def start(self) -> None:
        if not (self.folder / "data").exists():
            self._initdb("data")
        self._pg_ctl("data", "start", self.port)
        self.running = True

    def stop(self) -> None:
        self._pg_ctl("data", "stop")
        self.running = False

    def remove(self) -> None:
        if self.running:
            try:
                self.stop()
            except subprocess.SubprocessError:  # pragma: no cover - reported by the test
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


class PostgresPair(_Programs):
    """A primary and its streaming replica (hot standby) on free local ports."""

    def __init__(self):
        super().__init__("lineups-replica-")
        self.primary_port, self.replica_port = free_port(), free_port()
        self._running: list[str] = []

    @property
    def primary_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.primary_port}/postgres"

    @property
    def replica_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.replica_port}/postgres"

    def start(self) -> None:
        """Make and start both; raises when any step fails (then call `stop`)."""
        self._initdb("primary")
        self._pg_ctl("primary", "start", self.primary_port)
        self._running.append("primary")
        self._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres",
            "-D", str(self.folder / "replica"), "-R", "-c", "fast", "--no-sync",
        )
        self.start_replica()

    def start_replica(self) -> None:
        self._pg_ctl("replica", "start", self.replica_port)
        self._running.append("replica")
        self.wait_for_replay()

    def stop_replica(self) -> None:
        """Stop the standby at once (as a crash would)."""
        self._running.remove("replica")
        self._pg_ctl("replica", "stop", mode="immediate")

    def stop(self) -> None:
        for name in reversed(self._running):
            try:
                self._pg_ctl(name, "stop", mode="immediate" if name == "replica" else "fast")
            except subprocess.SubprocessError:  # pragma: no cover - reported by the test
                pass
        self._running.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _scalar(self, url: str, sql: str):
        engine = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as connection:
                return connection.execute(text(sql)).scalar()
        finally:
            engine.dispose()

    def _flush_primary(self) -> None:
        """Have the primary flush its WAL up to now: one transaction committed with
        `synchronous_commit=on`. The standby is sent only flushed WAL, and with the
        server's `synchronous_commit=off` a last record that no commit flushes (the end
        of the base backup, say) waits for the background writer's next standby
        snapshot, up to 15 s."""
        engine = create_engine(self.primary_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as connection:
                connection.execute(text("SET synchronous_commit = on"))
                connection.execute(text("SELECT txid_current()"))
        finally:
            engine.dispose()

    def pause_replay(self) -> None:
        """The replica keeps serving what it has, and lags from now on."""
        self._scalar(self.replica_url, "SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self._scalar(self.replica_url, "SELECT pg_wal_replay_resume()")
        self.wait_for_replay()

    def wait_for_replay(self, timeout: float = PATIENCE_S) -> None:
        """Until the replica has replayed everything the primary has written so far. With
        `synchronous_commit=off` a commit's record may still wait in the primary's WAL
        buffers, behind `pg_current_wal_lsn()`: the insert position counts it."""
        target = self._scalar(self.primary_url, "SELECT pg_current_wal_insert_lsn()::text")
        self._flush_primary()
        deadline = time.monotonic() + timeout
        while True:
            try:
                done = self._scalar(self.replica_url, f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")
            except Exception:  # noqa: BLE001 - still starting
                done = False
            if done:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the replica did not replay up to {target} in {timeout} s")
            time.sleep(0.02)
