"""What profiling found for each figure that misses its target, and what would fix it.

Written by hand from profiles of the 1,000,000-record runs (py-spy and cProfile on the
server process; pyinstrument and cProfile in the benchmark's process), keyed by figure
id; the report prints an entry only while its figure misses.
"""

from __future__ import annotations

_INGEST = """\
This machine ran at about half its morning speed in the 17:59 run: the same bare
executemany reference wrote 67,818 rows/s, against 128,422 at 14:52 UTC; ingest's
ratio to it rose from 0.35× to 0.49× (0.53× at 17:42). At 0.49× of the morning's
reference ingest would make ~63,000 rows/s. Profile (pyinstrument, 1,000,000 rows,
loaded machine, 36 s): the SQLite `executemany` of the new rows 22.8 s and the commit
(the WAL checkpoint) 3.3 s; reading the CSV 3.0 s (Arrow's parser on both cores, each
column but `ref` dictionary-encoded into a categorical, so validation no longer
factorizes a million strings per column: reading plus factorizing was ~9 s); validation
2.8 s; the driver values 2.8 s, now made for the next chunk on a helper thread while the
driver writes (sqlite3 releases the GIL while SQLite works). What is left is SQLite's
own insert into the indexed table (the unique (feed_id, ref) index holds the 36-character
feed id in every entry) and the checkpoint; putting the constant columns into the
statement instead of binding them changed nothing measurable."""

_MERGE = """\
This run's machine was about half its morning speed (see the ingest reference). In
process, on the idle machine at 16:24 UTC, the same merge took 0.83-0.93 s (it was
1.5-1.7 s that hour before this change, 1.25 s in the 14:52 run). Done here: text is
held as categoricals (`store.columns`, loaded coded by `store.records`), and the engine
groups and picks on the codes, so no string is hashed during a merge; the feed lists
come out as categoricals too. Profile of what is left (pyinstrument, 1,000,000
records): the row ids (hashing parts per distinct value, folding, base32 text for
213,854 rows) ~0.5 s of 1.4 s under the profiler, the replay of chains with a
counterparty disagreement 0.2 s, sorting into precedence 0.07 s. The baseline now gets
the same categorical input, which made it faster too (3.9 s -> 2.1 s). What would fix
the rest: the ids' text made only for rows served (most rows of a result are never on
a page), or a faster machine."""

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
per core). In the two runs of 17:42 and
17:59 UTC, with the machine at about half its morning speed, the rate came to 0.48× of
the ceiling (0.52× at 14:52); nothing on the warm path changed in between (the pages
are the cached rows' bytes, whatever the dtypes of the result), and it is not yet
profiled whether the slower machine or something else moved the ratio."""

_EXPORT_FIRST = """\
The CSV writer (`store.csvtext`, in Arrow) takes categorical columns as they are: each
category's cell text is decided once and kept per set of categories (shared by every
slice and selection of a merged result), cut down per block to the categories it
uses, and the block's cells are written by one Arrow `take`. In process the whole
290,347-row result now takes 0.9 s of CPU (was 1.3-1.4 s): this run's in-process
reference 295,186 rows/s (153,440 at 14:52 on a faster machine). Warm exports met
their targets in the 17:42 run (whole 301,719, share 249,607 rows/s) and the share
export again here (274,733); the whole-store export missed by 5% on this slower run.
The first export of a link also makes its selection: the filter and C3 sort of the
merged result (about 0.5 s for the share link's `from`/`to`, most of it sorting and
comparing row ids where dates tie) before the first byte. What would fix the rest:
the row ids as fixed-width bytes rather than Python strings (their sort and CSV text
are the largest part left), and selections of the same merged result made from one
sorted order instead of sorting each afresh."""

_EXPLORER = """\
Profile (cProfile and a Playwright script, 2026-11-23 afternoon, loaded machine): the
cold path from submitting the sign-in to the first rows is ~1.2 s for the server to
build the session and answer `GET /explorer` (0.4-0.7 s of it loading and merging the
buyer's records), ~1-1.4 s to load and start 3.4 MB of Panel/Bokeh JavaScript, and
~1.3 s for the browser to draw the page, most of it Tabulator drawing the table three
times (first build, when the stylesheets load, after layout), each time measuring
column widths over the rows it draws. Done here: the charts are plain Bokeh, made once
per session and redrawn in place (HoloViews cost ~0.3 s of CPU a chart, again at every
filter change); the hidden tabs are built when first opened; matplotlib is no longer
imported. Server CPU for a session's page 2.07 s -> 0.98 s cold, a filter change
~0.5 s -> ~0.05 s: filter changes now meet their target. What would fix the first
view: fixed column widths and a smaller first table page (fewer Tabulator passes), and
the buyer's merge made when the server starts."""

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
  pages of `/v1/lineups?limit=100` (the first request, made as soon as the server
  answers `/healthz`, waits for the start-up warming to load and merge the store), then `wrk`
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
  rows on screen, cold on the first sign-in, a few seconds after the server started
  (a fresh process, which warms the demo buyer's merged view at start, and an empty
  browser cache), warm on a later one; *filter change* is from changing a filter (port,
  commodity, latest, merge mode twice) to the new row count on screen.
"""
