"""The processes a benchmark starts, and what they use.

`Process` starts a command that serves HTTP on a free 127.0.0.1 port, waits until a
URL answers, and stops it with SIGTERM (then SIGKILL) when the block ends; its output
goes to a log file. `serve` starts `lineups serve` so, `lineups` runs another command.
`rss_mib` reads a process's resident memory, `RssSampler` records it while something
runs, `cpu_budget` holds processes to a share of the CPU (a cgroup each). Every
process a benchmark starts, it stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import psutil
import requests

#: What `lineups serve` logs once a worker has built its explorer (cli/serve.py): a figure
#: of the whole server (its memory, a pass that must not meet the build) waits for it.
EXPLORER_READY = "The explorer is ready"


def lineups_command() -> list[str]:
    """The `lineups` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("lineups")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def lineups(*args: str, env: dict[str, str], timeout: float = 1800) -> str:
    """The standard output of `lineups ARGS` with `env` added to this environment;
    CalledProcessError when it fails."""
    return subprocess.run([*lineups_command(), *args], env={**os.environ, **env}, check=True, capture_output=True,
                          text=True, timeout=timeout).stdout


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(folder: Path, name: str, env: dict[str, str], *options: str, explorers: int = 0) -> "Process":
    """A fresh `lineups serve OPTIONS` on a free 127.0.0.1 port with `env`, answering
    /healthz (`ready_s` after its start), its log `folder`/NAME.log; with `explorers`,
    once that many of its workers have built their explorer."""
    port = free_port()
    command = [*lineups_command(), "serve", "--host", "127.0.0.1", "--port", str(port), *options]
    server = Process(command, port, folder / f"{name}.log", {"LINEUPS_BASE_URL": f"http://127.0.0.1:{port}", **env})
    server.start("/healthz")
    return server.wait_for_log(EXPLORER_READY, explorers) if explorers else server


def rss_mib(pid: int) -> float:
    """The resident memory of process `pid` in MiB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def server_pids(pid: int) -> list[int]:
    """A server process and its workers."""
    try:
        return [pid, *(child.pid for child in psutil.Process(pid).children())]
    except psutil.NoSuchProcess:
        return []


def server_rss_mib(pid: int) -> float:
    """Resident memory of a server process and its workers, in MiB."""
    total = 0.0
    for one in server_pids(pid):
        try:
            total += rss_mib(one)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


class RssSampler:
    """A process's resident memory (`measure(pid)`, MiB) every `interval` s in a thread
    while the block runs: `samples` as (seconds since the start, MiB), `first`, `peak`."""

    def __init__(self, pid: int, interval: float = 0.01, measure: Callable[[int], float] = rss_mib):
        self.pid, self.interval, self.measure = pid, interval, measure
        self._start = time.monotonic()
        self.samples: list[tuple[float, float]] = []
        self._sample()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def first(self) -> float:
        return self.samples[0][1]

    @property
    def peak(self) -> float:
        return max(mib for _, mib in self.samples)

    def _sample(self) -> None:
        self.samples.append((time.monotonic() - self._start, self.measure(self.pid)))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


class Process:
    """A server subprocess on 127.0.0.1:`port`; a context manager."""

    def __init__(self, command: list[str], port: int, log: Path, env: dict[str, str] | None = None):
        self.command, self.port, self.log_path = command, port, log
        self.env = {**os.environ, **(env or {})}
        self.base_url = f"http://127.0.0.1:{port}"
        self.popen: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self, ready_path: str = "/", timeout: float = 120.0) -> "Process":
        """Start the command and wait until GET `ready_path` answers (`ready_s`: the
        seconds that took). Raises RuntimeError (with the end of its log) when it exits
        or never answers."""
        self._log = self.log_path.open("wb")
        began = time.perf_counter()
        self.popen = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT, env=self.env)
        try:
            self._wait_ready(ready_path, timeout)
            self.ready_s = time.perf_counter() - began
        except BaseException:
            self.stop()  # never leave a server behind
            raise
        return self

    def _wait_ready(self, ready_path: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.command[0]} exited ({self.popen.returncode}): {self.tail()}")
            try:
                requests.get(self.base_url + ready_path, timeout=5)
                return
            except (requests.ConnectionError, requests.Timeout):  # not listening, or not serving yet
                time.sleep(0.1)
        raise RuntimeError(f"{self.command[0]} did not answer within {timeout:.0f} s: {self.tail()}")

    def wait_for_log(self, text: str, count: int = 1, timeout: float = 60.0) -> "Process":
        """Wait until the process's log holds `text` `count` times (without asking it
        anything). Raises RuntimeError when it exits or never says so."""
        deadline = time.monotonic() + timeout
        while self.log_path.read_bytes().decode("utf-8", "replace").count(text) < count:
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.command[0]} did not say {text!r} {count} time(s): {self.tail()}")
            time.sleep(0.1)
        return self

    def tail(self, size: int = 2000) -> str:
        self._log.flush()
        return self.log_path.read_bytes()[-size:].decode("utf-8", "replace")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; only this process."""
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self._log.close()

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


#: The cgroup (v1) CPU controller's folder, where `cpu_budget` makes its groups.
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")


def cpu_budget_available() -> bool:
    """Whether `cpu_budget` can work here: Linux's v1 CPU controller, writable (root)."""
    return (CPU_CGROUPS / "cpu.cfs_quota_us").exists() and os.access(CPU_CGROUPS, os.W_OK)


@contextlib.contextmanager
def cpu_budget(pids: list[int], cores: float, name: str) -> Iterator[None]:
    """Hold each process of `pids` (all its threads) to `cores` of CPU while the block
    runs (a cgroup each, the CFS quota `cores` × the period; `scaling --worker-cpus`),
    then back to the root group. Linux's v1 CPU controller (`CPU_CGROUPS`) as root;
    RuntimeError where it is not there."""
    if not cpu_budget_available():
        raise RuntimeError(f"no writable cgroup v1 CPU controller at {CPU_CGROUPS}: run as root on Linux")
    groups = []
    try:
        for pid in pids:
            group = CPU_CGROUPS / f"lineups-bench-{name}-{pid}"
            group.mkdir()
            groups.append(group)
            period = int((group / "cpu.cfs_period_us").read_text())
            (group / "cpu.cfs_quota_us").write_text(str(max(1000, round(cores * period))))
            (group / "cgroup.procs").write_text(str(pid))  # the whole process, every thread
        yield
    finally:
        for group in groups:
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):  # gone already
                    (CPU_CGROUPS / "cgroup.procs").write_text(pid)
            group.rmdir()
