"""What profiling found for each figure that misses its target, and what would fix it.

Written by hand from profiles of the 1,000,000-record runs (py-spy and cProfile on the
server process; pyinstrument and cProfile in the benchmark's process), keyed by figure
id; the report prints an entry only while its figure misses.
"""

from __future__ import annotations

_INGEST = """\
Profile (pyinstrument, 1,000,000 rows, on the shared 2-core machine: 45.7 s wall, 36.3 s
of CPU): the SQLite `executemany` of the new rows is 21.5 s (47%) and the commit, which
checkpoints the WAL into the database file, 5.2 s; reading the CSV 6.6 s; validation
6.4 s (one `pd.factorize` per column 2.8 s, cleaning blanks once per distinct value
2.7 s, most of it the million distinct refs); the columns as Python values for the
driver 3.0 s; `derive` with the content hash 0.9 s. The bare executemany reference
(now read as object columns, like ingest: with pyarrow installed, `dtype=str` gave
Arrow strings whose row iteration tripled that floor) writes the same rows into a
table without indexes or validation; the store's table has three indexes and four
more columns, and every row is checked. Done here: each column factorized once
(`validate.Distinct`), every check, parse and derived value computed on its distinct
values and reused, text columns handed on as categoricals so that `derive`, the
content hash (the same hash values as before) and the driver values work on codes;
times formatted once per distinct value; the reference and ingest runs alternated.
Larger SQLite caches, `temp_store=MEMORY` and foreign keys off changed nothing
measurable. What is left is SQLite's own insert into the indexed table and pandas'
CSV parser; for PostgreSQL, `COPY` instead of `executemany`."""

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
all the work of a warm page, ~330 µs of CPU a request against the ceiling's ~170 µs
(on a shared machine, 2026-11-23, both doubled: ~650 µs against ~335 µs). Tornado's
own request handling and the 100 KB write are the same as the ceiling's; on top of it
(py-spy, share of all samples): answering the page from the cached selection 8%
(reading the query 3%, the key's admission check 3%, the JSON join of the page's
cached rows 2%), the access log 5% (was ~20% of the handler's time). Done here: one
Core query for key, buyer and entitled feeds with their data versions; admissions
remembered while SQLite's `PRAGMA data_version` says the store is unchanged, so a warm
request never leaves the event loop; warm pages answered on the loop from the cached
selection, each page's row range and next cursor kept; the access log made cheaper
(its record made without `Logger.log`'s search of the call stack, its time text
formatted once a second by `cli.logs.SecondFormatter`, paths without `_`, `.` or a
share prefix not run through the three redaction patterns). What would fix the rest:
keeping each warm page's finished body (not only its rows) with the page position,
parsing a query string once per distinct string, and `--processes N` (one event loop
per core)."""

_EXPORT_FIRST = """\
The CSV writer is now `store.csvtext` (the explorer's download uses it too), in Arrow:
per block of 20,000 rows each column is grouped (`pd.factorize`; row ids and the feed
lists of merged rows, new strings on every row, converted as they are), the text of
each distinct value decided once by the same per-value rules as before (a vectorised
test over the Arrow buffers passes plain text through; only the rest goes through
the Python rules), and the block's cells, each with its separator, are written by
one Arrow `take` whose data buffer is the block's CSV text. Same bytes as the former
writer on the bench result, the CSV-injection data and random text. In process
(cProfile, 290,347 rows, a loaded machine): the former writer 2.2 s of CPU from
scratch, this one 1.4 s, of which grouping the text columns is ~45% (`pd.factorize`
of Python strings, ~50-100 ns a value, under the GIL) and converting ids and feed
lists to Arrow ~20%; the `take` and the copy into `bytes` run without the GIL. Nothing
of an export is kept (the former kept the result's codes, so a second export only
joined cells: ~1.1 s of Python under the GIL), so first and later exports cost the
same and the server's memory stays flat. What would fix the rest: text columns that
arrive coded (categoricals or Arrow dictionaries from the store loader and the merge,
so no export hashes strings again), or the CSV cells of a merged result encoded once
when it is made and shared by every selection of it."""

_EXPLORER = """Profile (cProfile, the demo buyer's page built in process, 2026-11-23): building
one session's explorer is ~1.0–1.8 s of CPU on this machine today: HoloViews
rendering the two charts ~0.7 s of it (`initialize_plot`), then param and Bokeh model
construction for ~110 widgets and panes; the merge of 5,000 records is a few tens of
ms. In the browser a cold first view adds loading and starting 3.4 MB of Panel/Bokeh
JavaScript from an empty cache. Three things moved the figure since the 1.5–2.2 s of
docs/explorer.md (10:31 UTC): this machine is slower today (the same run's pandas
baseline merge took 3.9 s against 2.9 s at 12:03); pyarrow, now installed for the CSV
writer, made pandas store inferred text in Arrow (in the browser test of the earlier
commit: cold 4.3 s with it, 2.6–3.3 s without; `store/__init__.py` now keeps Python
string storage). Not yet profiled: how much of the session's page building the
browser waits for before the first table rows show. What would fix it: fewer
widgets and panes built before the first paint, the charts' Bokeh models cached per
merged result, or the default view of each buyer's feeds built when the server
starts."""

FINDINGS: dict[str, str] = {
    "ingest.sqlite": _INGEST,
    "merge.cold": _MERGE,
    "api.rate": _API,
    "api.p99": _API,
    "export.whole.first": _EXPORT_FIRST,
    "export.share.first": _EXPORT_FIRST,
    "export.whole": _EXPORT_FIRST,
    "export.share": _EXPORT_FIRST,
    "explorer.first_view": _EXPLORER,
    "explorer.filter_max": _EXPLORER,
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
- **Page server time**: the same warm cursored pages on one connection (`wrk -c 1`),
  so that no request waits behind another; each round trip on 127.0.0.1 bounds the
  server's time for the page from above. Reference: the bare handler on one
  connection (`bench/page_latency.py`).
- **Exports**: share links made with `lineups link create BUYER QUERY --json`, fetched
  streamed; rows/s to the last byte. The whole-store export is one link without
  filters (the bench server's `LINEUPS_SHARE_CEILING` is above the result); the second
  link's `from`/`to` are chosen so that its result is just under 100,000 rows. The
  first run of each (the first export of that result) is also reported alone. The
  server's RSS is sampled every 10 ms during each export. Reference: the CSV writer
  alone (`api.render.csv_chunks`, `store.csvtext`) over the same rows in this process.
- **Server memory**: the server's VmRSS after each load run, with the whole result
  merged, sorted and its pages' rows encoded.
- **Explorer**: the browser test `tests/explorer/test_browser.py::test_the_explorer_flow`
  run once per run (`bench/explorer_figures.py`), each time against a fresh
  `python -m explorer` over the default demo data (5,000 records, SQLite) in headless
  Debian Chromium: *first view* is from submitting the sign-in form to the first table
  rows on screen, cold on the first sign-in of the fresh server (empty merge cache and
  browser cache), warm on a later one; *filter change* is from changing a filter (port,
  commodity, latest, merge mode twice) to the new row count on screen.
"""
