"""The merge engine (C2): a frame of records in, one row per vessel call out; provenance.
Pure: no session, no I/O (the records are loaded by `store.views.records`)."""
