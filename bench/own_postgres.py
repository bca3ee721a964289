"""A PostgreSQL server of the bench's own, set up as docs/deploying.md recommends for
the store, for `mixed.py --own-pg` and `scaling.py --own-pg`.

The machine's PostgreSQL runs Debian's defaults: 128 MB of shared buffers, so that a
1,000,000-record store (4.1 GB of tables and indexes with its views) is read through
the kernel's page cache, a system call a page, and that is what its figures measured.
A server sized for its store holds the pages the service reads in its own buffers.
`own_server` starts one for a run: a new cluster in a temporary folder (Debian's
`initdb` and `pg_ctl`; as root, run as the `postgres` user), on a free port of
127.0.0.1, with `SETTINGS` for this machine's memory and autovacuum on (PostgreSQL's
default), and removes it afterwards. The machine's server is not touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

from processes import free_port


def settings(memory_bytes: int | None = None) -> dict[str, str]:
    """The server's settings for a machine of `memory_bytes` (this one's by default;
    docs/deploying.md, "Sizing PostgreSQL"): a quarter of memory for shared buffers
    (at most 8 GB), the planner told that three quarters may be cached, and costs for
    an SSD."""
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    gib = memory_bytes / 2**30
    return {
        "shared_buffers": f"{int(min(gib / 4, 8) * 1024)}MB",
        "effective_cache_size": f"{int(gib * 3 / 4 * 1024)}MB",
        "maintenance_work_mem": "512MB",
        "work_mem": "16MB",
        "max_wal_size": "4GB",
        "random_page_cost": "1.1",
    }


def _binaries() -> Path:
    """Debian's folder of the newest PostgreSQL server's programs."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not found:
        raise RuntimeError("no PostgreSQL server programs under /usr/lib/postgresql (Debian's postgresql package)")
    return found[-1].parent


def _run(command: list[str]) -> None:
    """Run a server program, as the `postgres` user when this is root (PostgreSQL
    refuses to run as root)."""
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@contextlib.contextmanager
def own_server(memory_bytes: int | None = None) -> Iterator[str]:
    """A new PostgreSQL server with `settings(memory_bytes)` for the length of the
    block: yields the SQLAlchemy URL of its `bench` database."""
    folder = Path(tempfile.mkdtemp(prefix="lineups-bench-pg-"))
    data, port, binaries = folder / "data", free_port(), _binaries()
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    try:
        _run([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"])
        conf = {"port": str(port), "listen_addresses": "'127.0.0.1'", "unix_socket_directories": f"'{folder}'",
                **{name: f"'{value}'" for name, value in settings(memory_bytes).items()}}
        with open(data / "postgresql.conf", "a") as out:
            out.write("".join(f"{name} = {value}\n" for name, value in conf.items()))
        _run([str(binaries / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "start"])
        try:
            _run([str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "bench"])
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/bench"
        finally:
            _run([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def describe(memory_bytes: int | None = None) -> str:
    """The settings, for a report."""
    return ", ".join(f"{name} {value}" for name, value in settings(memory_bytes).items())
