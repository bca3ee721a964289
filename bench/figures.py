"""What a benchmark run reports, and where: figures against targets, the machine they
were measured on, and one small JSON file per run under `bench/results/`.

Every figure is the median of its runs with min and max (the machine is shared and
noisy); a timing of the service carries the same run's reference (a ceiling or a
baseline), so that a slow hour of the whole machine shows as such. `docs/benchmarks.md`
is made from the result files (`bench/report.py`), never by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import operator
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
_COMPARE = {">=": operator.ge, "<=": operator.le}


@dataclasses.dataclass(frozen=True)
class Target:
    """A bound the median must meet: `op` ">=" or "<="; `text` says it in words when
    the bound is relative to another figure of the run."""

    op: str
    value: float
    text: str = ""

    def met(self, median: float) -> bool:
        return _COMPARE[self.op](median, self.value)

    def __str__(self) -> str:
        return self.text or f"{self.op.replace('>=', '≥').replace('<=', '≤')} {self.value:,g}"


@dataclasses.dataclass
class Figure:
    """One reported figure of a run."""

    id: str
    section: str
    label: str
    unit: str
    values: list[float]
    target: Target | None = None
    #: The same run's reference: its label and median, in the same unit.
    reference: tuple[str, float] | None = None
    note: str = ""
    #: Why there is no value (a service that did not answer, a browser missing).
    missing: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def met(self) -> bool | None:
        """True or False against the target; None without a target or a value."""
        if self.target is None or not self.values:
            return None
        return self.target.met(self.median)

    def as_dict(self) -> dict:
        """The figure as a result file holds it (its note is printed, not kept)."""
        data = {"id": self.id, "section": self.section, "label": self.label, "unit": self.unit,
                "values": [round(v, 4) for v in self.values]}
        if self.target:
            data["target"] = dataclasses.asdict(self.target)
        if self.reference:
            data["reference"] = [self.reference[0], round(self.reference[1], 4)]
        if self.missing:
            data["missing"] = self.missing
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Figure":
        target = Target(**data["target"]) if data.get("target") else None
        reference = tuple(data["reference"]) if data.get("reference") else None
        return cls(data["id"], data["section"], data["label"], data["unit"], data["values"], target, reference,
                   missing=data.get("missing", ""))


def missing(id: str, section: str, label: str, unit: str, why: str, target: Target | None = None) -> Figure:
    """A figure that could not be measured in this run, and why."""
    return Figure(id, section, label, unit, [], target, missing=why)


def say(name: str, message: str) -> None:
    """A progress line on stderr."""
    print(f"[{name} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stage(name: str, what: str):
    """Progress lines around a step: what it does, with the load average, and its seconds."""
    say(name, f"{what} … (load {'/'.join(f'{x:.2f}' for x in os.getloadavg())})")
    start = time.perf_counter()
    yield
    say(name, f"{what}: {time.perf_counter() - start:.1f} s")


def print_figures(figures: list[Figure]) -> None:
    for figure in figures:
        value = f"{figure.median:,.3f}" if figure.values else "—"
        met = "" if figure.met is None else ("met" if figure.met else "MISSED")
        print(f"{figure.id:28s} {value:>14s} {figure.unit:7s} {met}  {figure.note or figure.missing}")


# ---------------------------------------------------------------- the machine
def machine() -> str:
    """Cores, memory, CPU model, load average and `speed()`: what a figure is set beside."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = platform.processor() or "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return (f"{os.cpu_count()} cores (nproc), {memory:.1f} GiB memory, {model}; load average "
            f"{os.getloadavg()[0]:.2f} at the start; {speed()}")


def speed() -> str:
    """How fast the machine is at the moment, in fixed tasks (~1 s in all, each the median
    of three rounds): a Python loop of 5,000,000 additions (the interpreter: most of a
    page's and a merge's time), and 20,000 reads and writes of 4 KiB at random places of
    a 64 MiB file in the page cache (a system call each, as SQLite reads and writes its
    pages). The same code's figures move by two to three times between machines of this
    kind, and these tasks move with them."""
    def loop() -> float:
        start, total = time.perf_counter(), 0
        for i in range(5_000_000):
            total += i
        return time.perf_counter() - start

    with tempfile.TemporaryFile() as file:
        block = os.urandom(1 << 20)
        for _ in range(64):
            file.write(block)
        file.flush()
        places = [random.randrange(64 * 256) * 4096 for _ in range(20_000)]

        def calls(call, data) -> float:
            start = time.perf_counter()
            for place in places:
                call(file.fileno(), data, place)
            return (time.perf_counter() - start) / len(places)

        loops = statistics.median(loop() for _ in range(3))
        read = statistics.median(calls(os.pread, 4096) for _ in range(3))
        write = statistics.median(calls(os.pwrite, block[:4096]) for _ in range(3))
    return (f"speed: a Python loop of 5M additions {loops * 1000:,.0f} ms, a 4 KiB read {read * 1e6:.1f} µs and "
            f"write {write * 1e6:.1f} µs in the page cache")


# ---------------------------------------------------------------- result files
def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def save(workload: str, figures: list[Figure], *, measured: str, where: str, store: str, records: int,
         argv: list[str] | None, folder: Path = RESULTS) -> Path:
    """One run's figures as `folder`/DATE-WORKLOAD-STORE-RECORDS.json, with the command
    that measured them (`argv`: the workload's arguments; `workload` may name a mode
    after a dash, as "full-quick")."""
    command = " ".join(["python -m bench", workload.split("-quick")[0], *(sys.argv[2:] if argv is None else argv)])
    folder.mkdir(parents=True, exist_ok=True)
    stamp = measured.replace(" UTC", "").replace(" ", "T").replace(":", "")
    path = folder / f"{stamp}-{workload}-{store}-{records}.json"
    result = {"workload": workload, "measured": measured, "machine": where, "store": store, "records": records,
              "command": command, "figures": [f.as_dict() for f in figures]}
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_results(folder: Path = RESULTS) -> list[dict]:
    """Every result file of `folder`, oldest first."""
    results = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    return sorted(results, key=lambda r: r["measured"])


# ---------------------------------------------------------------- a workload's run
def command(workload: str, doc: str) -> argparse.ArgumentParser:
    """A workload's arguments (`doc`'s first line its description), with `--results`."""
    parser = argparse.ArgumentParser(prog=f"python -m bench {workload}", description=doc.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the result files go")
    return parser


@dataclasses.dataclass
class Run:
    """One measurement of a workload: when it began, the machine, where its result goes."""

    workload: str
    results: Path
    argv: list[str] | None
    measured: str = dataclasses.field(default_factory=now)
    where: str = dataclasses.field(default_factory=machine)

    def save(self, figures: list[Figure], records: int, store: str = "sqlite", mode: str = "") -> Path:
        """Print the figures and write their result file (`save`; `mode` as "-quick")."""
        print_figures(figures)
        path = save(self.workload + mode, figures, measured=self.measured, where=self.where, store=store,
                    records=records, argv=self.argv, folder=self.results)
        say(self.workload, f"wrote {path}")
        return path
