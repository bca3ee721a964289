"""Likely duplicates among served rows: calls the merge kept apart although they are
probably one (issue 17 item 14, issue 19). One definition, used by the explorer's
flags (`likely_duplicates`), the operators' report (`lineups quality duplicates`,
`counts`) and the benchmark (bench/duplicates.py).

Two served rows are *likely one call* when they are at the same port, of the same
vessel (the same IMO number; or, when one of them has none, the same normalised name,
C2.2), of the same commodity subgroup (or, unresolved, the same commodity text), and
their dates (`combined_date`: the earliest of the row's ETA, ETB and ETD, which is its
ETA when the feeds give one) are at most 3 days apart.

Each pair has one *cause*, the first that applies of:
1. "counterparty disagreement": both rows name a shipper, receiver or charterer, and
   they differ (C2.4 keeps such calls apart on purpose);
2. "IMO missing": one row has an IMO number, the other none, and the merge did not
   already take both as that IMO (rows that carry their `vessel_key` say so; issue 19
   rule 1 merges these);
3. "name of several IMOs": the same, but rows with two or more IMO numbers carry the
   name among the rows given (rule 1 leaves such a name alone on purpose);
4. "commodity less specific": one row's commodity is its subgroup's "(Unspecified)"
   leaf, or not resolved, and the other's a specific leaf (rule 2 merges these unless
   the call has two specific candidates);
5. "other": anything else (two specific leaves, anchors more than 7 days apart, ...).
"""

from __future__ import annotations

from store.frames import pd

from store.normalize import vessel_name_key
from store.fields import COUNTERPARTY_FIELDS

WINDOW = pd.Timedelta(days=3)
CAUSES = ("counterparty disagreement", "IMO missing", "name of several IMOs", "commodity less specific", "other")


def likely_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    """The pairs of `rows` (served rows, C1 columns) that are likely one call, each
    once: columns `id`, `other` (row ids, `id` < `other`) and `cause`."""
    pairs, details, shared = _pairs(rows)
    causes = [_reasons(details[a], details[b], shared)[0] for a, b in zip(pairs["id"], pairs["other"])]
    return pd.DataFrame({"id": pairs["id"].to_numpy(dtype=object), "other": pairs["other"].to_numpy(dtype=object),
                         "cause": pd.Series(causes, dtype=object).to_numpy()})


def counts(rows: pd.DataFrame) -> dict[str, int]:
    """How many pairs of `rows` are likely one call, by cause (every cause listed)."""
    found = likely_pairs(rows)["cause"].value_counts()
    return {cause: int(found.get(cause, 0)) for cause in CAUSES}


def likely_duplicates(rows: pd.DataFrame) -> dict[str, str]:
    """{row id: "possible duplicate of <vessel> at <port>, <day>: <reasons>"} for the
    rows of `rows` that are likely one call with another (the explorer's flags)."""
    pairs, details, shared = _pairs(rows)
    out: dict[str, str] = {}
    for a, b in zip(pairs["id"], pairs["other"]):
        out.setdefault(a, _describe(details[a], details[b], shared))
        out.setdefault(b, _describe(details[b], details[a], shared))
    return out


def _pairs(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.Series], set[str]]:
    """(the pairs: columns id, other; the rows of the pairs by id; the name keys that
    rows with two or more IMO numbers carry)."""
    empty = pd.DataFrame({"id": pd.Series([], dtype=object), "other": pd.Series([], dtype=object)})
    if rows.empty:
        return empty, {}, set()
    frame = pd.DataFrame(
        {
            "id": rows["id"].astype(str).to_numpy(),
            "port": rows["port_unlocode"].astype(object).to_numpy(),
            "commodity": _commodity_group(rows).to_numpy(),
            "name": _name_keys(rows["vessel_name"]).to_numpy(),
            "imo": _text(rows["vessel_imo"]).to_numpy(),
            "when": _when(rows).to_numpy(),
        }
    )
    with_imo = frame[frame["imo"].notna() & frame["name"].notna()]
    imos = with_imo.groupby("name")["imo"].nunique()
    shared = set(imos.index[imos.to_numpy() > 1])
    frame = frame[frame["commodity"].notna() & frame["when"].notna()]
    on_imo = frame[frame["imo"].notna()]
    by_imo = on_imo.merge(on_imo, on=["port", "commodity", "imo"], suffixes=("", "_other"))
    named = frame[frame["name"].notna()]
    by_name = named.merge(named, on=["port", "commodity", "name"], suffixes=("", "_other"))
    by_name = by_name[by_name["imo"].isna() | by_name["imo_other"].isna()]
    columns = ["id", "id_other", "when", "when_other"]
    pairs = pd.concat([by_imo[columns], by_name[columns]])
    pairs = pairs[(pairs["id"] < pairs["id_other"]) & ((pairs["when"] - pairs["when_other"]).abs() <= WINDOW)]
    pairs = pairs.drop_duplicates(["id", "id_other"]).rename(columns={"id_other": "other"})[["id", "other"]]
    if pairs.empty:
        return empty, {}, shared
    return pairs.reset_index(drop=True), _details(rows, set(pairs["id"]) | set(pairs["other"])), shared


def _details(rows: pd.DataFrame, wanted: set[str]) -> dict[str, pd.Series]:
    ids = rows["id"].astype(str)
    chosen = rows[ids.isin(wanted).to_numpy()].assign(id=ids).drop_duplicates("id").set_index("id")
    return {row_id: pd.Series(values) for row_id, values in chosen.to_dict("index").items()}


def _text(column: pd.Series) -> pd.Series:
    values = column.astype(object)
    return values.where(values.notna(), None)


def _commodity_group(rows: pd.DataFrame) -> pd.Series:
    subgroup = _text(rows["commodity_normalized_subgroup"])
    raw = rows["commodity"].astype(object).map(lambda v: " ".join(str(v).lower().split()) if isinstance(v, str) else None)
    return subgroup.where(subgroup.notna(), raw)


def _when(rows: pd.DataFrame) -> pd.Series:
    # combined_date, as the explorer's page check narrows its read by it (`Lineups.near`).
    return pd.to_datetime(rows["combined_date"], utc=True)


def _name_keys(names: pd.Series) -> pd.Series:
    """C2.2's normalised name of each value (None for blanks), once per distinct value."""
    codes, uniques = pd.factorize(names.astype(object))
    keys = [(vessel_name_key(u) or None) if isinstance(u, str) else None for u in uniques] + [None]
    return pd.Series([keys[c] for c in codes], index=names.index, dtype=object)


def _describe(row: pd.Series, other: pd.Series, shared: set[str]) -> str:
    vessel = other["vessel_name"] if isinstance(other["vessel_name"], str) else f"IMO {other['vessel_imo']}"
    when = pd.Timestamp(other["combined_date"]).strftime("%d %b")
    place = other["port_name"] if isinstance(other["port_name"], str) else other["port_unlocode"]
    reasons = _reasons(row, other, shared)
    if reasons[0] == "counterparty disagreement":
        reasons[0] = " and ".join(f"{p}s" for p in _parties(row, other)) + " differ"
    return f"possible duplicate of {vessel} at {place}, {when}: {', '.join(reasons)}"


def _reasons(row: pd.Series, other: pd.Series, shared: set[str]) -> list[str]:
    """The causes that apply to a pair, in the order of the module docstring (the
    first is the pair's cause)."""
    reasons = []
    if _parties(row, other):
        reasons.append("counterparty disagreement")
    if pd.isna(row["vessel_imo"]) != pd.isna(other["vessel_imo"]) and not _one_imo(row, other):
        unnamed = row if pd.isna(row["vessel_imo"]) else other
        name = vessel_name_key(unnamed["vessel_name"]) if isinstance(unnamed["vessel_name"], str) else None
        reasons.append("name of several IMOs" if name in shared else "IMO missing")
    mine, theirs = row["commodity_normalized"], other["commodity_normalized"]
    if mine != theirs and (_loose(mine) or _loose(theirs)):
        reasons.append("commodity less specific")
    return reasons or ["other"]


def _one_imo(row: pd.Series, other: pd.Series) -> bool:
    """Whether the merge took both rows as one IMO number (rule 1 resolved the
    name-only one): then something else keeps them apart."""
    mine, theirs = row.get("vessel_key"), other.get("vessel_key")
    return isinstance(mine, str) and mine.startswith("IMO") and mine == theirs


def _parties(row: pd.Series, other: pd.Series) -> list[str]:
    """The counterparty fields that both rows name, differently."""
    return [
        party
        for party in COUNTERPARTY_FIELDS
        if isinstance(row[party], str) and isinstance(other[party], str)
        and row[party].casefold().split() != other[party].casefold().split()
    ]


def _loose(leaf) -> bool:
    return not isinstance(leaf, str) or leaf.endswith("(Unspecified)")
