"""Fixtures of the production tests: `lineups serve` as real processes over real
services (PostgreSQL, Redis), and ways to watch and hurt them.

`served` starts servers (`Served`) over this test's fresh store with the hand-made
data of tests/api/tiny_data.py; a server's log (stderr) names the process that
served each request, so a test can tell which worker answered a response (by its
`X-Request-Id`). No test stops a service it did not start (issue 16 item 17): the
tests that take a database or Redis away start their own (`replication.OwnPostgres`,
`test_shared_limits.own_redis`).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from tests.api.tiny_data import load_tiny
from tests.waiting import PATIENCE_S

ROOT = Path(__file__).resolve().parents[2]
#: The console script's entry point (`python -m cli.main` would load cli.main twice).
LINEUPS = [sys.executable, "-c", "from cli.main import main; main()"]
#: Tests make many requests with one key; the rate-limit tests set their own limit.
TEST_RATE_LIMIT = 100_000
_ACCESS = re.compile(r"\[(\d+)\] lineups\.access: (\S+) (\S+) (\d{3}) \S+ ([0-9a-f]{32})")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def store_env(db_url: str, schema: str | None = None, **extra: str) -> dict[str, str]:
    """The environment under which `lineups` uses the store at `db_url` (and `schema`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEUPS_")}
    env.update(LINEUPS_DB=db_url, LINEUPS_SECRET="test-secret-with-at-least-32-characters", LINEUPS_RATE_LIMIT=str(TEST_RATE_LIMIT))
    if schema:
        env["LINEUPS_DB_SCHEMA"] = schema
    env.update(extra)
    return env


def lineups(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run one `lineups` command to completion."""
    return subprocess.run([*LINEUPS, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


class Served:
    """A `lineups serve` process and its log."""

    def __init__(self, env: dict[str, str], args: tuple[str, ...], log_path: Path, processes: int, port: int | None = None):
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.processes = processes
        self.log_path = log_path
        self.process = subprocess.Popen(
            [*LINEUPS, "serve", "--port", str(self.port), "--processes", str(processes), *args],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log_path.open("wb"),
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_until_serving(self, timeout: float = 60, explorer: bool = False) -> None:
        """Until every worker has said it serves (and, `explorer`, that its explorer
        is ready: it is mounted after the API listens) and /healthz answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server exited with {self.process.returncode}:\n{self.log()[-3000:]}")
            said = self.log()
            if said.count(" serving (rate limit") >= self.processes and (
                not explorer or said.count("The explorer is ready") >= self.processes
            ):
                try:
                    if requests.get(f"{self.base_url}/healthz", timeout=2).status_code == 200:
                        return
                except requests.RequestException:  # not listening yet, or too busy to answer in time
                    pass
            time.sleep(0.05)
        pytest.fail(f"the server did not come up:\n{self.log()[-3000:]}")

    def workers(self) -> set[int]:
        """The process ids of the live workers (children of the server process)."""
        return children_of(self.pid)

    def served_by(self) -> dict[str, tuple[int, str, int]]:
        """For each request id in the access log: (pid, path, status)."""
        return {m[5]: (int(m[1]), m[3], int(m[4])) for m in _ACCESS.finditer(self.log())}

    def worker_of(self, response: requests.Response, timeout: float = PATIENCE_S) -> int:
        """The pid of the worker that served `response` (its log line may trail the
        response by a moment)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.served_by().get(response.headers["X-Request-Id"])
            if found is not None:
                return found[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"request {response.headers['X-Request-Id']} is not in the log")
            time.sleep(0.01)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 40) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in self.workers():
                os.kill(pid, signal.SIGKILL)
            self.process.kill()
            self.process.wait(5)
            raise


#: States of /proc/net/tcp.
LISTEN, ESTABLISHED = "0A", "01"


def tcp_sockets(port: int) -> list[tuple[str, int, int]]:
    """This machine's TCP sockets at 127.0.0.1:`port` (Linux's /proc/net/tcp): (state,
    remote port, bytes received and not yet read) each. For a listening socket the
    last is its accept queue: connections the kernel completed that no process has
    accepted yet. Lets a test wait for what a server did with what it was sent."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
        if local == f"0100007F:{port:04X}":
            found.append((state, int(remote.split(":")[1], 16), int(queues.split(":")[1], 16)))
    return found


def children_of(pid: int) -> set[int]:
    """Process ids whose parent is `pid`, but for those that have exited (zombies)."""
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return set()
    return {child.pid for child in children if _running(child)}


def alive(pid: int) -> bool:
    """True unless the process has exited (a zombie has exited)."""
    try:
        return _running(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def tiny_store(sessions, store_settings) -> dict:
    """This test's fresh store (SQLite or PostgreSQL) with the hand-made data; the ids
    and keys of `load_tiny`, plus `env` for `lineups` commands on it."""
    return {**load_tiny(sessions), "env": store_env(store_settings.db_url, store_settings.db_schema)}


@pytest.fixture
def served(tmp_path):
    """Start `lineups serve` processes: `served(env, *args, processes=N)`; every one
    still running is stopped (SIGTERM, then SIGKILL) at the end of the test."""
    started: list[Served] = []

    def start(
        env: dict[str, str], *args: str, processes: int = 1, wait: bool = True, explorer: bool = False, port: int | None = None,
    ) -> Served:
        server = Served(env, args, tmp_path / f"serve-{len(started)}.log", processes, port)
        started.append(server)
        if wait:
            server.wait_until_serving(explorer=explorer)
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            try:
                server.stop()
            except subprocess.TimeoutExpired:  # pragma: no cover - reported by the test
                pass
