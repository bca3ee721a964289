"""What profiling found for each figure that misses its target, and what would fix it.

Written by hand from profiles of the 1,000,000-record runs (py-spy and cProfile on the
server process; pyinstrument and cProfile in the benchmark's process), keyed by figure
id; the report prints an entry only while its figure misses.
"""

from __future__ import annotations

_INGEST = """\
Profile (pyinstrument, 1,000,000 rows, 22.7 s of CPU): the SQLite `executemany` of the
new rows is 8.8 s (39%); turning the columns into Python values for the driver 3.1 s
(14%); validation 6.5 s (29%: one `pd.factorize` per column to clean blanks once per
distinct value 2.0 s, IMO check digits 1.2 s, the NUL-character scan 1.1 s, lengths
0.6 s); `derive` 1.8 s (content hash 0.9 s); reading the CSV 2.3 s. The bare
executemany reference writes the same rows into a table without indexes or
validation; the store's table has three indexes (`(feed_id, ref)` unique,
`commodity_raw_key`, and `(feed_id, changed_version)` for incremental re-merge, ~5%),
and every row is checked. Done here: plain object columns instead of pandas string
arrays (their factorize and iteration are several times slower), lengths counted in C,
port names derived by code rather than by hashing a Port object per row, the driver's
cursor fed an iterator. What would fix the rest: validate and derive on the distinct
values of all columns from a single factorize pass that later steps reuse (today each
step factorizes again), and for PostgreSQL `COPY` instead of `executemany`."""

_MERGE = """\
Profile (cProfile, 1,000,000 synthetic records): `pd.factorize` of the object (string)
columns is ~0.5 s of ~1.3 s (13 calls: vessel key, port, commodity key, feed, three
counterparties, feed names; ~36 ns a value, all under the GIL, so the helper thread
cannot share it); `pd.isna` on object columns while picking values 0.15 s; picking
values 0.3 s; the record-by-record replay of chains with a counterparty disagreement
0.1 s. Done here: the row ids' base32 text is computed in numpy (the `base64` module
loops in Python: 0.4 s at 210,000 rows, now 0.06 s). What would fix the rest: string
columns that arrive already coded (pandas categoricals or Arrow dictionary arrays from
the store loader, which factorizes each text column once anyway to share string
objects), so the engine groups on integer codes; or the grouping in polars/DuckDB,
which the issue measured at ~0.9–1.0 s."""

_API = """\
Profile (cProfile and py-spy on the server, the load running): the event loop does
all the work of a warm page, ~330 µs of CPU a request against the ceiling's ~170 µs.
Tornado's own request handling and the 100 KB write are the same as the ceiling's; on
top of it: the access log ~20% of the handler's time (a LogRecord, `strftime` and a
write per request: `api.app.log_request` under `cli.serve`'s logging set-up), reading
the query and its cursor binding ~6%, the key's admission check (hash, SQLite change
stamp, rate limiter) ~8%, the page from the row cache and the JSON join ~10%. Done
here: one Core query for key, buyer and entitled feeds with their data versions
(was three ORM queries and a Feed load with ports, ~0.7 ms); admissions remembered
while SQLite's `PRAGMA data_version` says the store is unchanged, so a warm request
never leaves the event loop (the worker-thread hop made every `send` and `recv` wait
for the GIL: the service ran at 20–25% of the ceiling before); warm pages answered
on the loop from the cached selection; sort keys and each page's row range and next
cursor kept with the result; the JSON body joined once. What would fix the rest: an
access log that formats lazily in a queue handler off the loop, and `--processes N`
(one event loop per core)."""

_EXPORT_FIRST = """\
Profile (cProfile of `render.CsvColumns`, 290,000 merged rows of ~520 bytes: every
row lists ~5 feed ids and names): encoding the result's columns once is ~0.6 s (one
`pd.factorize` a column, the text of each distinct value checked for blanks, formula
starts and quoting once) and joining the cells into lines ~0.55 s (`",".join` and
`encode` per row, ~1.9 µs a row: the floor of CSV text in Python). The first export
of a result pays both, later ones only the join. What would fix it: encode the CSV
columns when the result is cached (before the first export asks), or write the lines
in a compiled extension (pyarrow's CSV writer) where the join costs tens of
nanoseconds a row."""

FINDINGS: dict[str, str] = {
    "ingest.sqlite": _INGEST,
    "merge.cold": _MERGE,
    "api.rate": _API,
    "api.p99": _API,
    "export.whole.first": _EXPORT_FIRST,
    "export.share.first": _EXPORT_FIRST,
    "export.whole": _EXPORT_FIRST,
    "export.share": _EXPORT_FIRST,
}

METHOD = """\
- **Ingest** (`bench/ingest_bench.py`): a feed CSV shaped like the demo feeds (real
  ports, valid IMO numbers, blanks, spelling variants) is validated and upserted into a
  fresh SQLite store (`lineups ingest`'s code path), and into a fresh PostgreSQL schema
  when the server answers. Reference: the same rows written with a bare `sqlite3`
  executemany into a table without indexes, no validation.
- **Cold merge** (`bench/merge_bench.py`): a synthetic record frame like the store's (20
  feeds, ~5 records a vessel call, 1% counterparty disagreements, blanks) merged by
  `store.merge.merge` in this process, against a straightforward pandas merge (sort,
  diff/cumsum, groupby-last; it does less: no counterparty splits, no ids). Peak memory
  is what tracemalloc sees allocated during one merge.
- **The store for the service figures** (`bench/dataset.py`): the demo generator at
  scale, 20 feeds over the demo's real ports, each vessel call reported by ~5 feeds,
  written through validation and upsert. All feeds are visible to one buyer.
- **Next query after an ingest**: a fresh `LineupService` answers the first query
  (load from SQLite and merge), then, per run, 1,000 records (half revisions of stored
  records, half new) are ingested into one feed and the next query is timed: read the
  changed records, merge again the touched merge keys, filter, sort, first page; the
  result is checked against a full merge. Reference: `merge.merge` of all the visible
  records, which that query paid before incremental re-merge (on top of reloading the
  whole feed and sorting).
- **API page**: `lineups serve` on a free 127.0.0.1 port (one process,
  `LINEUPS_RATE_LIMIT` raised so the load is not refused). The bench walks the first
  pages of `/v1/lineups?limit=100` (the first request merges the store), then `wrk`
  (1 thread, 32 connections, a Lua script setting `X-API-Key`, bounded in time and
  requests) requests those cursored pages round robin. The ceiling is a bare Tornado
  handler in its own process (`bench/ceiling.py`) returning a pre-serialised body of
  the same size; ceiling and service runs alternate.
- **Exports**: share links made with `lineups link create BUYER QUERY --json`, fetched
  streamed; rows/s to the last byte. The whole-store export is one link without
  filters (the bench server's `LINEUPS_SHARE_CEILING` is above the result); the second
  link's `from`/`to` are chosen so that its result is just under 100,000 rows. The
  first run of each is also reported alone: it encodes the result's CSV columns. The
  server's RSS is sampled every 10 ms during each export. Reference: the CSV renderer
  alone (`api.render.csv_chunks`) over the same rows in this process.
- **Server memory**: the server's VmRSS after each load run, with the whole result
  merged, sorted and its pages' rows encoded.
"""
