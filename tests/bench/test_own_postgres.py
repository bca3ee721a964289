"""The benches' own PostgreSQL server (`bench.stores.own_server`, `--own-pg`): it runs
with the settings docs/deploying.md recommends for the machine's memory, holds a
store, and leaves nothing behind."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import text

from bench import stores
from store.database.db import make_engine
from tests.conftest import need_service


def test_the_benches_own_server_runs_with_the_recommended_settings_and_is_removed_after():
    try:
        stores.pg_binaries()
    except RuntimeError as error:
        need_service("PostgreSQL's server programs", error)
    memory = 2 * 2**30  # a 2 GiB machine: a quarter for shared buffers
    with stores.own_server(memory) as url:
        engine = make_engine(url)
        try:
            with engine.begin() as connection:
                shown = {name: connection.scalar(text(f"SHOW {name}")) for name in ("shared_buffers", "random_page_cost", "autovacuum")}
                connection.execute(text("CREATE TABLE kept (n int)"))
                connection.execute(text("INSERT INTO kept VALUES (1), (2)"))
            with engine.connect() as connection:
                assert connection.scalar(text("SELECT sum(n) FROM kept")) == 3
        finally:
            engine.dispose()
        port = engine.url.port
        folders = set(Path(tempfile.gettempdir()).glob("lineups-bench-pg-*"))
        assert folders  # the cluster's folder, while it runs
    assert shown == {"shared_buffers": "512MB", "random_page_cost": "1.1", "autovacuum": "on"}
    with pytest.raises(OSError):  # stopped: nothing listens on its port any longer
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert not any(folder.exists() for folder in folders)
