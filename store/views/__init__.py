"""The read path (issue 15): merged rows kept in the database, read a page at a time.

- `store.views.stored`: merged rows (the merge engine's frames) to table rows and back.
- `store.views.upkeep`: building views, bringing them up to date after a change of
  records (only the vessels the change touched), single flight across processes, and
  dropping views no buyer can read any longer.
- `store.views.sql`: a query (C3) as SQL over the kept rows: filters, `latest`, the
  C3 order and keyset pages (C4).
- `store.views.lineups`: what the API, the share links and the explorer call: pages,
  counts, whole results a block at a time, provenance. Holds no data between calls.

docs/architecture.md tells the whole story.
"""
