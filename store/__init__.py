"""The store, in layers; each imports only the layers below it (pyproject.toml's
import-linter contract, checked with the tests):

    base modules → reference → database | merging → query → access → views → intake

- base modules: `fields` (the record's fields, C1), `errors` (one exception per error
  code), `frames` (pandas as the store uses it), `ids` (UUIDs), `names` (rows named
  as operators type them, C11), `normalize` (normal forms of C2.2), `settings` (the
  service's settings);
- `reference`: data shipped with the product (commodity taxonomy, port directory);
- `database`: schema, migrations, sessions, stored settings; `merging`: the pure merge
  engine (DataFrame in, DataFrame out), beside it and independent of it;
- `query`: the /v1/lineups query (C3, C5), parameters to query and back;
- `access`: buyers, keys, subscriptions, share links;
- `views`: the read path (records loaded for the engine, merged views kept in the
  database, their upkeep, pages as SQL, CSV text, records' histories);
- `intake`: what writes records (feed files, ingest, the feed registry, commodity
  mappings, the demo data set), bringing the views up to date.

It imports nothing from `api/`, `explorer/` or `cli/`, and sets nothing when
imported (pandas' options: `store.frames`).
"""
