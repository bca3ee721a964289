"""Text held as categoricals (`store.merging.columns`): joining frames of several feeds, or a
cached result with re-merged rows, keeps every value and sorted categories."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from store.merging import columns

_text = st.one_of(st.none(), st.sampled_from(["a", "b", "Z", "é", "zz", "Cargill, Inc."]), st.text(max_size=3))
_part = st.tuples(st.lists(_text, max_size=30), st.integers(0, 30))


def _values(values) -> list:
    return [None if pd.isna(v) else v for v in pd.Series(values, dtype=object)]


@settings(max_examples=200, deadline=None)
@given(st.lists(_part, min_size=1, max_size=4), st.booleans())
def test_union_keeps_every_value_in_order_with_sorted_categories(parts, share):
    # Slices of a categorical keep all its categories (as a filtered cached result does).
    coded = [columns.category(values)[:cut] if cut < len(values) else columns.category(values) for values, cut in parts]
    if share:  # a part that shares the first one's categories object
        coded.append(coded[0][:2])
    joined = columns.union(coded)
    assert _values(joined.astype(object)) == [v for part in coded for v in _values(part.astype(object))]
    categories = list(joined.categories)
    assert categories == sorted(categories) and len(set(categories)) == len(categories)


def test_concat_keeps_text_categorical_and_other_columns_as_they_are():
    first = pd.DataFrame({"port": columns.category(["NLRTM", None]), "quantity": [1.0, None]})
    second = pd.DataFrame({"port": pd.Series(["BEANR"], dtype=object), "quantity": [2.5]})
    joined = columns.concat([first, second])
    assert columns.is_coded(joined["port"]) and list(joined["port"].cat.categories) == ["BEANR", "NLRTM"]
    assert _values(joined["port"]) == ["NLRTM", None, "BEANR"]
    assert joined["quantity"].tolist()[::2] == [1.0, 2.5] and list(joined.index) == [0, 1, 2]
