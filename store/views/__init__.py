"""The read path (issue 15): merged rows kept in the database, read a page at a time.

- `store.views.records`: stored records as the merge engine's input frame.
- `store.views.stored`: merged rows (the merge engine's frames) to table rows and back.
- `store.views.changelog`: which (vessel, port) pairs each change of a feed touched.
- `store.views.upkeep`: a view built or brought up to date after a change of records
  (only the pairs the change touched), in the transaction of the change.
- `store.views.builds`: who builds a view, once across processes; views no buyer
  can read dropped.
- `store.views.pending`: what a buyer asked for and reads now; the switch to it.
- `store.views.builder`: the builder of the views that waiting changes need.
- `store.views.footprint`: the kept views' rows and size on disk.
- `store.views.sql`: a query (`store.query`, C3) as SQL over the kept rows: filters, `latest`, the
  C3 order and keyset pages (C4).
- `store.views.history`: every version of a record an ingest stored.
- `store.views.lineups`: what the API, the share links and the explorer call: pages,
  counts, whole results a block at a time, provenance. Holds no data between calls.

docs/architecture.md tells the whole story, and what it costs.
"""
