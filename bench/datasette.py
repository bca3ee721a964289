"""What a user would pick instead, a step of the mixed workload (issue 15): the same
distinct questions asked of Datasette 0.65 over the same raw records, as it comes and
set up as a user serving them as an API would (`TUNED_INDEXES`, `TUNED_ARGS`), with the
filters it can express (a buyer's feeds, port, country, commodity leaves, dates; no
merge, no `latest`). Datasette reads SQLite files: on PostgreSQL the step is left out.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from bench.figures import Figure
from bench.load import LoadResult, load_pass
from bench.processes import Process, free_port, rss_mib
from bench.stores import Buyers, Dataset
from store.reference.taxonomy import default_taxonomy


def datasette_command(folder: Path) -> list[str]:
    """Datasette 0.65 in a virtual environment of its own (made once, from PyPI)."""
    venv = Path(os.environ.get("LINEUPS_BENCH_DATASETTE_VENV", Path(tempfile.gettempdir()) / "lineups-bench-datasette"))
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "datasette==0.65.*"], check=True)
    return [str(python), "-m", "datasette"]


def datasette_path(params: dict, feeds: tuple[str, ...]) -> str | None:
    """The Datasette URL of the same question over the raw records: the buyer's feeds,
    port, country, commodity leaves, dates overlapping by eta; no merge and no
    `latest` (Datasette has neither)."""
    taxonomy = default_taxonomy()
    args = [("feed_id__in", ",".join(feeds)), ("commodity__notblank", "1"), ("_size", params.get("limit", "100")),
            ("_sort", "eta"), ("_shape", "objects")]
    if "port" in params:
        args.append(("port_unlocode__exact", params["port"]))
    if "country" in params:
        args.append(("country_name__exact", params["country"]))
    if "commodity" in params:
        wanted = params["commodity"].casefold()
        leaves = [l.id for l in taxonomy.leaves if wanted in (l.name.casefold(), l.subgroup.casefold(), l.group.casefold())]
        args.append(("commodity_leaf__in", ",".join(leaves)))
    if "from" in params:
        args.append(("eta__gte", params["from"]))
    if "to" in params:
        args.append(("eta__lte", params["to"] + " 23:59:59"))
    return "/bench/records.json?" + urlencode(args)


#: Datasette set up as a user who serves these questions as an API would: indexes for
#: the filters, each with the order after it, and pages without the total count and
#: facets that Datasette adds to every table page by default (the service's pages
#: carry neither): out of the box nearly all of a question's time is counting and
#: suggesting facets.
TUNED_INDEXES = (("eta",), ("port_unlocode", "eta"), ("country_name", "eta"), ("commodity_leaf", "eta"), ("feed_id", "eta"))
TUNED_ARGS = "&_nocount=1&_nofacet=1&_nosuggest=1"


def tuned_copy(db: str, folder: Path) -> str:
    """The raw records of `db` in a file of their own (`folder`/tuned/bench.db, so that
    Datasette names it as the original) with `TUNED_INDEXES`."""
    target = folder / "tuned" / Path(db).name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(db)) as source:
        source.execute("ATTACH DATABASE ? AS tuned", (str(target),))
        source.execute("CREATE TABLE tuned.records AS SELECT * FROM main.records")
        for columns in TUNED_INDEXES:
            source.execute(f"CREATE INDEX tuned.ix_{'_'.join(columns)} ON records({', '.join(columns)})")
        source.execute("ANALYZE tuned")
        source.commit()
    return str(target)


def datasette_pass(
    dataset: Dataset, buyers: Buyers, asks: list[tuple[str, str, dict]], folder: Path, tuned: bool = False
) -> tuple[LoadResult, float]:
    """The questions of `asks` against Datasette over the same SQLite file (read-only,
    immutable), or with `tuned` over a copy of its records set up as `TUNED_INDEXES`
    and `TUNED_ARGS` say; and its memory after the pass."""
    db = dataset.db_url.removeprefix("sqlite:///")
    if tuned:
        db = tuned_copy(db, folder)
    port = free_port()
    command = [*datasette_command(folder), "serve", "-i", db, "-h", "127.0.0.1", "-p", str(port),
               "--setting", "sql_time_limit_ms", "30000", "--setting", "num_sql_threads", "3"]
    try:
        with Process(command, port, folder / "datasette.log").start("/-/versions.json") as server:
            extra = TUNED_ARGS if tuned else ""
            paths = [(datasette_path(params, buyers.keys[name][2]) + extra, key) for name, key, params in asks]
            result = load_pass(server.base_url, paths)
            return result, rss_mib(server.pid)
    finally:
        if tuned:
            shutil.rmtree(Path(db).parent, ignore_errors=True)


def datasette_figures(dataset: Dataset, buyers: Buyers, asks: list[tuple[str, str, dict]], folder: Path) -> list[Figure]:
    """The same questions of Datasette as it comes, then set up as an API (`datasette_pass`)."""
    figures: list[Figure] = []
    for id, name, tuned in (("datasette", "Datasette", False), ("datasette_tuned", "Datasette set up as an API", True)):
        result, rss = datasette_pass(dataset, buyers, asks, folder, tuned)
        label = ("Datasette set up as an API (indexes for the filters and eta; no count or facets per page): pages/s"
                 if tuned else "Datasette 0.65 over the raw records, same questions: pages/s")
        figures += [Figure(f"{id}.rate", "Mixed workload", label, "req/s", [result.rate]),
                    Figure(f"{id}.p50", "Mixed workload", f"{name}: p50 latency", "ms", [result.p50_ms]),
                    Figure(f"{id}.p99", "Mixed workload", f"{name}: p99 latency", "ms", [result.p99_ms])]
        if not tuned:
            figures.append(Figure("datasette.rss", "Mixed workload", "Datasette: RSS after the pass", "MiB", [rss]))
    return figures
