"""`bench.processes.cpu_budget`: what `python -m bench scaling --worker-cpus` holds each server
process to, so that PostgreSQL has the rest of the cores (issue 15's two-process
target, measured as if PostgreSQL ran on cores of its own)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.processes import CPU_CGROUPS, cpu_budget, cpu_budget_available

pytestmark = pytest.mark.skipif(not cpu_budget_available(), reason="no writable cgroup v1 CPU controller (root on Linux)")

#: Two threads that never wait: a process that would take a whole core.
BUSY = "import threading\ndef spin():\n    while True: pass\nthreading.Thread(target=spin, daemon=True).start()\nspin()"


def _cores_used(processes: list[psutil.Process], seconds: float) -> list[float]:
    before = [sum(p.cpu_times()[:2]) for p in processes]
    time.sleep(seconds)
    return [(sum(p.cpu_times()[:2]) - b) / seconds for p, b in zip(processes, before)]


def _group_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return ""


def test_a_budget_holds_a_busy_process_to_its_share_then_lets_it_go():
    """Beside a twin that no budget holds, measured over the same seconds (so that a
    machine busy with other tests squeezes both alike)."""
    held, twin = (subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2))
    try:
        time.sleep(0.3)
        with cpu_budget([held.pid], 0.25, "test"):
            assert _group_of(held.pid) == f"/lineups-bench-test-{held.pid}"
            assert _group_of(twin.pid) == "/"
            used = _cores_used([psutil.Process(held.pid), psutil.Process(twin.pid)], 2.0)
        assert _group_of(held.pid) == "/"
        assert not list(CPU_CGROUPS.glob(f"lineups-bench-test-{held.pid}"))
    finally:
        for busy in (held, twin):
            busy.kill()
            busy.wait()
    assert used[0] <= 0.4, used
    assert used[1] >= 1.4 * used[0], used


def test_a_process_gone_before_the_end_leaves_no_group_behind():
    short = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    with cpu_budget([short.pid], 0.5, "gone"):
        short.wait()
    assert not list(CPU_CGROUPS.glob(f"lineups-bench-gone-{short.pid}"))
