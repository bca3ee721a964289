"""pandas as the store uses it: every store module that makes or reads a DataFrame
imports `pd` from here, so that the option below is set before the first frame is
made, and only by a command or server that uses pandas (a `lineups --help` or
`lineups link list` imports no pandas at all, issue 50).

pandas 3 keeps text columns it infers in its `str` dtype, stored in Arrow when
pyarrow is installed (it is: `store.views.csvtext` writes CSV with Arrow kernels). Arrow
storage makes a new Python string for every row a column hands out, where the engine
relies on one shared object per distinct value: at a million records the merged
result took twice the memory. Python storage keeps the engine's memory and speed as
measured, whatever is installed; Arrow is used where the code asks for it by name.
"""

import pandas as pd

pd.set_option("mode.string_storage", "python")

__all__ = ["pd"]
