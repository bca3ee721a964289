"""What profiling found for each figure that misses its target, and what would fix it.

Written by hand from profiles of the 1,000,000-record runs (py-spy and cProfile on the
server process; pyinstrument and cProfile in the benchmark's process), keyed by figure
id; the report prints an entry only while its figure misses.
"""

from __future__ import annotations

_INGEST = """\
2026-11-30 02:08 UTC: 50,709 rows/s (runs 49,192-50,940; met, at the edge), 0.30x the run's bare
executemany (168,788). 01:13 UTC: 54,696 rows/s (runs 53,228-56,902; met), 0.38x the run's bare
executemany (145,551). 00:06 UTC (8 KiB pages): 43,500 rows/s, missed, in an hour when the bare
executemany reference wrote 132,849 rows/s (190,088 at 20:11 the day before, when the
ingest made 52,941 and met): the ratio to the reference rose from 0.28x to 0.33x. An
hour before this run, four alternating pairs of 1,000,000-row ingests into fresh stores
on the same machine gave 49,662 rows/s (median) with 4 KiB pages and 53,909 with 8 KiB
(docs/performance.md, "The daily update"). So the code meets the target in the
machine's normal hours and misses it in its slow ones, as the history below shows.
Earlier: this machine ran at about half its morning speed in the 17:59 run: the same bare
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
held as categoricals (`store.merging.columns`, loaded coded by `store.merging.records`), and the engine
groups and picks on the codes, so no string is hashed during a merge; the feed lists
come out as categoricals too. Profile of what is left (pyinstrument, 1,000,000
records): the row ids (hashing parts per distinct value, folding, base32 text for
213,854 rows) ~0.5 s of 1.4 s under the profiler, the replay of chains with a
counterparty disagreement 0.2 s, sorting into precedence 0.07 s. The baseline now gets
the same categorical input, which made it faster too (3.9 s -> 2.1 s). What would fix
the rest: the ids' text made only for rows served (most rows of a result are never on
a page), or a faster machine."""

_API = """\
This figure asks one question again (one buyer walking the pages of one query): a
footnote since the read path keeps merged rows in the database (issue 15); the
headline is the mixed workload above. Every page is parsed, admitted (one query),
read (one index range of one view) and rendered afresh: no process keeps rows,
pages or answers. Earlier designs met this figure with per-process caches of merged
rows, sorted selections, encoded rows and finished page bodies, which the mixed
workload showed to be the wrong target (one buyer's cached question; memory growing
with the questions asked). What would help now: `--processes N` (one event loop per
core) and rendering pages straight from the rows the driver returns."""

_MIXED = """\
The daily update: where its time goes and what was tried is in docs/performance.md
("The daily update"). On stores just built (8 KiB pages, stored rows read whole only
where the key stays; `bench/mixed.py --steps daily`, 2026-11-30 00:46 and 00:52 UTC):
medians 1.92 and 1.96 s, five of six updates under 2 s (docs/benchmarks-daily.md). In
the whole bench it comes after the workload's 100,000-record ingest and ten minutes of
other work: 2.14-2.20 s at 01:13, 2.42-2.56 s at 02:08 (the upkeep 2.09 s, 233,000
read calls, 31 MiB read from the disk). The bench's steps by hand right after (two
updates after each, fresh processes): 1.86-1.87 s after the subscription change, 2.10-2.15
s after the 100,000-record ingest (the store 10% larger: 16% more page calls, 7 MiB from
the disk), 2.72-3.18 s after two idle minutes (126 MiB from the disk) and 6.4-13.3 s
after two more (185 MiB): this VM's kernel pages out what was not read for a minute or
two. A `VACUUM`ed store was slower (2.26-2.44 s: full pages split on the inserts). So
the SQLite figure is ~1.9 s for a warm 1,000,000-record store and more for a larger or
paged-out one; PostgreSQL (its buffer pool cannot be paged out here) met it in the
whole workload (1.84 s). On a fast machine (2026-11-29 20:11-21:30 UTC, a Python loop of
5M additions 144-147 ms) 2.17 s in the whole bench (one update, before the figure was
a median), then 2.02-2.08 s (median 2.08) in three updates of a fresh
1,000,000-record store (docs/benchmarks-daily.md) and 1.86-2.55 s in twelve on one
store: at the target, not under it. Per update, each of the four `all` views that hold
the feed moves ~800-900 rows (a revised ETA moves a row's date: a delete and an insert
in the table and six indexes) and the `by_source` view ~600; writing them is ~40% of
the update, reading the stored rows of the touched pairs 13%, the widening 13%.
Pages: profile (cProfile, in process, 100,000 and 250,000 records): a page is ~6 ms
median;
the driver's fetch and the frame built from it are most of it; `latest` with content
filters probes the (vessel, port) index per row that is not the pair's top and is the
slowest shape (up to ~150 ms). The planner needs statistics of `merged_rows` for that
probe (without them a page took 15.8 s instead of 37 ms): they are refreshed after
every full build. Under load one server process is bound by the GIL of its 8 request
threads on 2 cores: more distinct pages per second need `--processes 2` (on
PostgreSQL) rather than a faster page. Upkeep: a subscription change builds the
buyer's `all` view in the command before the change takes effect (the buyer reads
their old feeds meanwhile; `by_source` rows are kept once per feed, in one view that
already holds every feed), seconds for a large set of feeds (most of it writing the
rows with five indexes); a daily update merges again only the touched (vessel, port)
pairs, but does so for every `all` view that holds the feed, so its time grows with
the number of distinct feed sets in use."""

_EXPORT_FIRST = """\
Since the views moved into the database (issue 15) an export reads its rows from the
view, 20,000 at a time (keyset blocks), instead of slicing a merged result that every
process kept in memory with its cells already encoded (which met these targets:
660,974 rows/s on 2026-11-24). That left 42,857 rows/s at 1,000,000 records
(2026-11-29, fdc584a). Profile in process (cProfile, a 63,561-row result of a
250,000-record store, 1.8 s): SQLite's fetch 0.50 s, the ORM's handling of the
result's rows 0.37 s, the pandas frame made of them 0.27 s, the CSV 0.46 s. Done
since: the rows read as a Core statement, turned into Arrow columns in one pass and
written as CSV from those (`Lineups.csv_blocks`): 1.6-1.9 s -> 1.03 s in process (1.39 s
with the Core reads alone, alternating with the Arrow columns), of which
the fetch is 0.46 s, the Row objects 0.13 s, Arrow 0.13 s, the CSV 0.15 s. The whole
bench at 1,000,000 records on a fast hour (2026-11-29 14:40, the API's CSV pages and
the explorer's download on the same writer since): 88,032 rows/s for the whole store,
83,998 for the 100,000-row link (42,857 and 43,389 at 11:46 on a machine as fast,
before these changes); the writer alone over the rows as read, 275,239 rows/s. SQLite's
fetch alone (30 columns into Python values) is ~140,000 rows/s on the fastest machine
yet, under both targets. Tried: ADBC's SQLite driver (rows straight into Arrow, the
fetch 0.21 s) fails on a column whose first rows are all NULL (it takes the type from
them, then meets text). Tried on 2026-11-29 (17:55 UTC, a slower machine: speed probe
235 ms) and left out: SQLite writing each row's CSV line itself, one text per row
instead of 30 values (every C1/C9 rule as SQL: blanks with `trim` over Python's
whitespace, the formula guard, RFC 4180 quoting with `instr`/`replace`, times with
`strftime`; whole quantities as integers, the others patched in Python): the same
35,171,567 bytes for the 63,561-row export, but 3.4-4.0 s against the Arrow writer's
1.1-1.6 s (16,000-19,000 against 40,000-60,000 rows/s): SQLite's expressions cost
more per row than fetching the values. What would meet the targets: the CSV line of
each kept row written into the view with the row (read back at ~1.2M rows/s), at ~550
bytes more a row (+58% storage) and more bytes written by every daily update."""

_EXPLORER = """\
Profiled 2026-11-29 (14:15-14:40 UTC) on the 5,000 demo records: a timeline of one
cold sign-in (Playwright's network events, the server's CPU, Chromium's JavaScript
profile). Found first: the browser tests' store had no views built (the test loaded
the demo data without what `lineups serve --demo` does after it), so the first sign-in
built the buyer's `all` view and the first `by_source` filter change its view (1.4 s
of the flow's server CPU): that was the slowest filter change (1.04 s), which no buyer
of a served store meets; the store is now left as the command leaves it. Then, from
pressing Sign in: the page 0.2 s, Panel's and Bokeh's 3.4 MB of JavaScript loaded and
started by ~0.6 s, the websocket and the first document ("Opening your lineups…") by
~0.8 s, the account 0.05 s, the first page read and the explorer made 0.19 s, Bokeh's
patch of every new model serialised and sent 0.20 s (the server's CPU from the click
to the rows 0.5-0.6 s in all), then ~1.0 s in the browser building the explorer:
Bokeh's layout ~0.2 s, Tabulator drawing 50 rows of wrapped text and measuring each
row's height ~0.3 s, and again when its stylesheets load ~0.15 s. Done: the first page
is read before the explorer is placed, so the table is drawn once with its rows (it
was drawn empty, then filled, then filled again by the page's own fix for updates
Tabulator drops while building, which now refills only a table that dropped one):
both charts 0.3 s sooner (four alternating pairs: 2.49 -> 2.19 s mean), the rows
within the spread (2.21 -> 2.17 s). The code of 2026-11-27 (98c8e7d, 1.40 s that day)
took 2.19-2.21 s on this machine: the first view moves with the machine more than with
the code. After this run (15:05 UTC): the two charts join the page with their first
totals, after the rows; placed with the table as empty figures they cost the browser
~0.35 s before the rows showed (four alternating pairs: rows 1.91 -> 1.68 s, both charts
1.92 -> 1.86 s). What would move it further: fewer models in the first document (the
filters' widgets), and Tabulator without a height measured per row (fixed row
heights, which wrapped cells rule out)."""

FINDINGS: dict[str, str] = {
    "ingest.sqlite": _INGEST,
    "merge.cold": _MERGE,
    "api.rate": _API,
    "api.p99": _API,
    "mixed.rate": _MIXED,
    "mixed.p99": _MIXED,
    "mixed.subscription": _MIXED,
    "mixed.daily": _MIXED,
    "mixed.startup": _MIXED,
    "export.whole.first": _EXPORT_FIRST,
    "export.share.first": _EXPORT_FIRST,
    "export.whole": _EXPORT_FIRST,
    "export.share": _EXPORT_FIRST,
    "explorer.first_view": _EXPLORER,
    "explorer.filter_max": _EXPLORER,
}

#: Earlier full runs (1,000,000 records), kept by hand: the figures move with this shared
#: machine's speed as much as with the code, and the reference columns show how much.
HISTORY = """\
This machine's speed changes through the day: the bare `sqlite3` executemany of the
ingest reference wrote 128,422 rows/s at 14:52 UTC on 2026-11-23, 67,818 at 17:59 the
same day and 185,000-197,000 on 2026-11-24. Targets that are absolute (ingest, merge, exports,
the explorer) can miss in a slow hour that the code meets in a normal one; the ratios
to the same run's reference say more than the figures alone.

| run (UTC) | bare executemany | ingest | cold merge (pandas baseline) | warm pages × ceiling | whole export (first) | 100k share link (first) | explorer first view, cold | what changed before it |
|---|--:|--:|--:|--:|--:|--:|--:|---|
| 2026-11-23 14:52 | 128,422 | 44,454 | 1.249 s (3.9 s) | 0.52× | 221k (140k) | 155k (97k) | 3.6 s | CSV writer in Arrow, one per process |
| 2026-11-23 17:59 | 67,818 | 33,503 | 1.311 s (2.1 s) | 0.48× | 285k (199k) | 275k (162k) | 3.57 s | text as categoricals; Arrow CSV reader; plain Bokeh charts |
| 2026-11-24 18:37 | 185,030 | 71,389 | 0.675 s (1.0 s) | 0.44× | 654k (408k) | 661k (404k) | 1.64 s | nothing (a faster hour) |
| 2026-11-24 19:04 | 195,113 | 66,634 | 0.615 s (1.2 s) | 0.51× | 590k (355k) | 558k (294k) | 1.53 s | warm pages: one join, parsed query strings kept, stamp once per loop turn; warming at start |
| 2026-11-24 19:18 | 197,125 | 74,538 | 0.612 s (1.2 s) | 0.55× | 661k (395k) | 596k (394k) | 1.47 s | a page served twice keeps its body |
| 2026-11-29 12:33 | 123,773 | 31,986 | 1.291 s (2.3 s) | 0.03× | 53k (53k) | 55k (50k) | 2.58 s | merged views kept in the database, stateless servers (issue 15; warm pages: one buyer's distinct pages now, a footnote); exports' CSV from the rows as read |
| 2026-11-29 14:40 | 173,892 | 48,134 | 0.734 s (1.1 s) | 0.03× | 88k (87k) | 84k (85k) | 1.99 s | the explorer's table drawn once, its tests' store with views built; one CSV writer (the exports' reference is now the rows-as-read writer) |
| 2026-11-29 20:11 | 190,088 | 52,941 | 0.618 s (1.1 s) | 0.04× | 91k (87k) | 86k (83k) | 1.62 s | SQLite keeps a record's five times as integers (migration 0014; the ingest ~11% faster in A/B pairs); the daily update's bench reader a process of its own (2.17 s, missed) |
| 2026-11-30 00:06 | 132,849 | 43,500 | 0.731 s (1.3 s) | 0.03× | 72k (70k) | 72k (72k) | 1.74 s | new SQLite stores have 8 KiB pages (the ingest ~9% faster in A/B pairs; the daily update 2.20 s, missed); a slower hour (probe 181 ms) |
| 2026-11-30 01:13 | 145,551 | 54,696 | 0.708 s (1.3 s) | 0.04× | 79k (75k) | 74k (72k) | 1.96 s | a view's stored rows read whole only where the key stays (e626d23; the daily update 2.15 s here after the workload's large ingest, 1.92–1.96 s on a store just built) |
| 2026-11-30 02:08 | 168,788 | 50,709 | 0.606 s (1.1 s) | 0.04× | 87k (87k) | 73k (62k) | 2.28 s | nothing in the service (the daily update's note gives the bytes read from the disk: 2.55 s here, 31 MiB); a fast hour (probe 147–155 ms) |
"""

METHOD = """\
- **Ingest** (`bench/ingest_bench.py`): a feed CSV shaped like the demo feeds (real
  ports, valid IMO numbers, blanks, spelling variants) is validated and upserted into a
  fresh SQLite store (`lineups ingest`'s code path), and into a fresh PostgreSQL schema
  when the server answers. Reference: the same rows written with a bare `sqlite3`
  executemany into a table without indexes, no validation.
- **Cold merge** (`bench/merge_bench.py`): a synthetic record frame like the store's (20
  feeds, ~5 records a vessel call, 1% counterparty disagreements, blanks) merged by
  `store.merging.merge.merge` in this process, against a straightforward pandas merge (sort,
  diff/cumsum, groupby-last; it does less: no counterparty splits, no ids). Peak memory
  is what tracemalloc sees allocated during one merge.
- **The store for the service figures** (`bench/dataset.py`): the demo generator at
  scale, 20 feeds over the demo's real ports, each vessel call reported by ~5 feeds,
  written through validation and upsert. All feeds are visible to one buyer.
- **Mixed workload** (`bench/mixed.py`, the headline): 7 buyers on different subsets
  of the 20 feeds (one on all), their views built as subscription changes build them;
  a fresh `lineups serve`; 1,500 distinct first pages with random port / country /
  commodity (leaf, subgroup or group) / date windows / `latest` / `merge=by_source`,
  each with its buyer's key, from 4 keep-alive connections (wrk, each question asked
  once, interrupted when all are answered, at most 120 s); then a subscription change
  to a new feed set and a 100,000-record `lineups ingest` while other buyers' pages
  are asked every 50 ms; 1,000-record updates (as many as the run's runs, each a
  different change in a fresh process: the figure is their median); the server's
  RSS. Beside it, Datasette 0.65 (its own virtual environment) over the same SQLite file, immutable, asked the
  same questions as its table filters over the raw records (feeds, port, country,
  commodity leaves, dates; it has no merge and no `latest`). `bench/mixed.py
  --records 250000 1000000 …` writes the curve over store sizes
  (docs/benchmarks-mixed.md).
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
  alone (`csvtext.csv_of_columns` of the rows' Arrow columns, the blocks read once
  before) over the same rows in this process (until 2026-11-29: the writer of a
  pandas frame of them, which exports no longer used).
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
