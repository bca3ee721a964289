"""`python -m bench` (issue 48): every registered workload is one module that runs as
`python -m bench WORKLOAD`; an unknown name is refused with the list of workloads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_every_workload_answers_its_help():
    for name in WORKLOADS:
        done = bench(name, "--help")
        assert done.returncode == 0, (name, done.stderr[-2000:])
        assert f"usage: python -m bench {name}" in done.stdout, name


def test_an_unknown_workload_is_refused_with_the_list():
    done = bench("no-such-workload")
    assert done.returncode == 2
    assert all(name in done.stdout for name in WORKLOADS)
