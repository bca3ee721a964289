"""The store, by subsystem: `database` (schema, migrations, sessions), `intake` (feed
files in), `reference` (commodity taxonomy, port directory), `merging` (the merge
engine), `views` (merged views kept in the database and the read path over them),
`access` (buyers, keys, subscriptions, share links). It imports nothing from `api/`
or `explorer/`.

pandas 3 keeps text columns it infers in its `str` dtype, stored in Arrow when
pyarrow is installed (it is: `store.views.csvtext` writes CSV with Arrow kernels). Arrow
storage makes a new Python string for every row a column hands out, where the engine
relies on one shared object per distinct value: at a million records the merged
result took twice the memory. Python storage keeps the engine's memory and speed as
measured, whatever is installed; Arrow is used where the code asks for it by name.
"""

import pandas as _pd

_pd.set_option("mode.string_storage", "python")
