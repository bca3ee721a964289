"""The store, by subsystem: `database` (schema, migrations, sessions), `intake` (feed
files in), `reference` (commodity taxonomy, port directory), `merging` (the merge
engine), `views` (merged views kept in the database and the read path over them),
`access` (buyers, keys, subscriptions, share links). It imports nothing from `api/`
or `explorer/`, and sets nothing when imported (pandas' options: `store.frames`).
"""
