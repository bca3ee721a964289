"""Properties of the merge engine (C2) on generated record sets.

The alphabets are small so that keys, dates 7 days apart, counterparty clashes and
updated_at ties happen often. `reference_groups` is C2.4 written out literally, record
by record; the engine (vectorized, see store.merging.merge_plan) must agree with it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pickle
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from unittest import mock

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from merge_records import FEED_A, FEED_B, FEED_C, FEED_NAMES, frame

from store.merging import columns, merge_plan
from store.fields import COUNTERPARTY_FIELDS, DATE_FIELDS
from store.normalize import vessel_name_key
from store.merging.merge import PICKED_FIELDS, merge, merge_groups, merge_resolved
from store.merging.resolve import Identities
from pipeline_reference import apply_latest, resolve_records

WEEK = dt.timedelta(days=7)
BASE = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
ROOT = Path(__file__).resolve().parents[2]

_times = st.builds(
    lambda days, seconds: BASE + dt.timedelta(days=days, seconds=seconds),
    st.integers(0, 22),
    st.sampled_from([0, 1, 3600]),
)
_maybe_time = st.one_of(st.none(), _times)
_party = st.sampled_from([None, None, "Acme", "ACME ", " acme", "Beta  Trading", "beta trading", "Gamma"])
#: (vessel_key, vessel_name): IMO 9074729 named OCEAN GRACE, a name-only OCEAN GRACE
#: (issue 19 rule 1), and now and then IMO 9348247 also named Ocean Grace (the name
#: then has two IMO numbers and resolves to none) or under another name.
_vessel = st.sampled_from([
    ("IMO9074729", "OCEAN GRACE"), ("IMO9074729", "MV Ocean Grace"), ("IMO9074729", None),
    ("NAME:OCEAN GRACE", "Ocean Grace"), ("NAME:OCEAN GRACE", "M/V OCEAN GRACE"),
    ("IMO9348247", "DAWN CAPE"), ("IMO9348247", "Ocean Grace"), ("NAME:DAWN CAPE", "Dawn Cape"),
])
#: (commodity_key, commodity, commodity_normalized): iron ore leaves for rule 2.
_commodity = st.sampled_from([
    ("dry-bulk/coal/thermal-coal", "steam coal", "Thermal Coal"),
    ("raw:soya beans", "Soya Beans", None),
    ("dry-bulk/iron-ore/iron-ore-unspecified", "iron ore", "Iron Ore (Unspecified)"),
    ("dry-bulk/iron-ore/iron-ore-unspecified", "iron ore", "Iron Ore (Unspecified)"),
    ("dry-bulk/iron-ore/iron-ore-fines", "IOF", "Iron Ore Fines"),
    ("dry-bulk/iron-ore/iron-ore-pellets", "pellets", "Iron Ore Pellets"),
])
_record = st.fixed_dictionaries(
    {
        "source_id": st.sampled_from([FEED_A, FEED_B, FEED_C]),
        "vessel": _vessel,
        "port_unlocode": st.sampled_from(["NLRTM", "NLRTM", "BEANR"]),
        "goods": _commodity,
        "eta": _maybe_time,
        "etb": _maybe_time,
        "etd": _maybe_time,
        "shipper": _party,
        "receiver": _party,
        "charterer": st.sampled_from([None, None, None, "Acme"]),
        "quantity": st.sampled_from([None, 1000.0, 2500.0]),
        "dwt": st.sampled_from([None, 81000, 82000]),
        "vessel_status": st.sampled_from([None, "expected", "berthed"]),
        "berth_terminal": st.sampled_from([None, "Berth 1", "Berth 2"]),
        "updated_days": st.integers(0, 3),
        "created_days": st.integers(0, 2),
    }
)


def _finish(raw: list[dict]) -> list[dict]:
    out = []
    for i, r in enumerate(raw):
        r = dict(r)
        r["updated_at"] = BASE - dt.timedelta(days=30 + r.pop("updated_days"))
        r["created_at"] = r["updated_at"] - dt.timedelta(days=r.pop("created_days"))
        r["source_name"] = FEED_NAMES[r["source_id"]]
        r["vessel_key"], r["vessel_name"] = r.pop("vessel")
        r["commodity_key"], r["commodity"], r["commodity_normalized"] = r.pop("goods")
        if r["commodity_normalized"] is not None:
            r["commodity_normalized_subgroup"] = r["commodity_key"].split("/")[1]
        r["ref"] = f"r{i:02d}"
        out.append(r)
    return out


records_lists = st.lists(_record, min_size=0, max_size=24).map(_finish)
fast = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _anchor(r: dict):
    return r["eta"] or r["etb"] or r["etd"]


def _norm(value):
    return None if value is None else " ".join(value.split()).casefold()


def _conflicts(group: list[dict], r: dict) -> bool:
    for f in COUNTERPARTY_FIELDS:
        mine = _norm(r[f])
        if mine is not None and any(_norm(m[f]) not in (None, mine) for m in group):
            return True
    return False


def reference_groups(records: list[dict], mode: str) -> list[list[dict]]:
    """C2.3/C2.4 word for word: per key, records in (anchor, updated_at, source_id, ref)
    order each join the qualifying group with the latest anchor (the older group on a
    tie), or start one; a record without a date is alone. Under `all`, keys are those
    of issue 19's rules 1 and 2 (`pipeline_reference.resolve_records`); the groups
    hold the records as resolved."""
    if mode == "all":
        records = resolve_records(records, WEEK)
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    groups: list[list[dict]] = []
    for r in records:
        key = (r["vessel_key"], r["port_unlocode"], r["commodity_key"])
        key += (r["source_id"],) if mode == "by_source" else ()
        if _anchor(r) is None:
            groups.append([r])
        else:
            by_key[key].append(r)
    for items in by_key.values():
        items.sort(key=lambda r: (_anchor(r), r["updated_at"], r["source_id"], r["ref"]))
        mine: list[list[dict]] = []
        for r in items:
            fits = [
                g
                for g in mine
                if any(abs(_anchor(m) - _anchor(r)) <= WEEK for m in g) and not _conflicts(g, r)
            ]
            if fits:
                max(fits, key=lambda g: max(_anchor(m) for m in g)).append(r)
            else:
                mine.append([r])
        groups += mine
    return groups


def reference_values(group: list[dict]) -> dict:
    """C2.5 word for word."""
    ordered = sorted(group, key=lambda r: (-r["updated_at"].timestamp(), r["source_id"], r["ref"]))
    values = {f: next((r[f] for r in ordered if r.get(f) is not None), None) for f in PICKED_FIELDS}
    values["source_id"] = ";".join(sorted({r["source_id"] for r in group}))
    values["source_name"] = ";".join(sorted({r["source_name"] for r in group}))
    values["created_at"] = min(r["created_at"] for r in group)
    values["updated_at"] = max(r["updated_at"] for r in group)
    dates = [values[f] for f in DATE_FIELDS if values[f] is not None]
    values["combined_date"] = min(dates) if dates else None
    return values


def _plain(value):
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if value is pd.NaT:
        return None
    return value


def _engine_groups(records: list[dict], mode: str):
    rows, membership = merge_groups(frame(*records), mode)
    members: dict[str, list[dict]] = defaultdict(list)
    for r, row_id in zip(records, membership):
        members[row_id].append(r)
    return rows, membership, members


@fast
@given(records_lists, st.sampled_from(["all", "by_source"]))
def test_groups_and_values_match_the_literal_reading_of_c2(records, mode):
    rows, membership, members = _engine_groups(records, mode)
    assert membership.notna().all()  # every record is in exactly one group
    groups = reference_groups(records, mode)
    expected = {frozenset(r["ref"] for r in g) for g in groups}
    assert {frozenset(r["ref"] for r in g) for g in members.values()} == expected
    assert len(rows) == len(expected) and rows["id"].is_unique
    resolved = {frozenset(r["ref"] for r in g): g for g in groups}
    for _, row in rows.iterrows():
        group = resolved[frozenset(r["ref"] for r in members[row["id"]])]
        want = reference_values(group)
        want["vessel_key"] = group[0]["vessel_key"]
        want["commodity_key"] = group[0]["commodity_key"]
        got = {f: _plain(row[f]) for f in want}
        assert got == want


@fast
@given(records_lists)
def test_no_group_holds_conflicting_counterparties(records):
    _, _, members = _engine_groups(records, "all")
    for group in members.values():
        for f in COUNTERPARTY_FIELDS:
            assert len({_norm(r[f]) for r in group} - {None}) <= 1


@fast
@given(records_lists)
def test_consecutive_anchors_in_a_group_are_at_most_7_days_apart(records):
    _, _, members = _engine_groups(records, "all")
    for group in members.values():
        anchors = sorted(_anchor(r) for r in group if _anchor(r) is not None)
        assert len(anchors) == len(group) or len(group) == 1
        assert all(b - a <= WEEK for a, b in zip(anchors, anchors[1:]))


@fast
@given(records_lists, st.randoms(use_true_random=False), st.sampled_from(["all", "by_source"]))
def test_output_does_not_depend_on_input_order(records, random, mode):
    shuffled = list(records)
    random.shuffle(shuffled)
    first = merge(frame(*records), mode).sort_values("id").reset_index(drop=True)
    second = merge(frame(*shuffled), mode).sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(first, second)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_lists, st.sampled_from(["all", "by_source"]))
def test_records_held_as_categoricals_merge_to_the_same_rows(records, mode):
    """The store holds text as categoricals, one frame a feed, joined with the union
    of their categories (`store.merging.columns`); the engine picks on codes and must give the
    rows it gives for plain object columns, value for value."""
    plain = frame(*records)
    parts = [
        part.assign(**{c: columns.category(part[c]) for c in part.columns if part[c].dtype == object and c != "ref"})
        for _, part in plain.groupby("source_id", sort=False)
    ]
    coded = merge(columns.concat(parts) if parts else plain, mode)
    assert not parts or all(columns.is_coded(coded[f]) for f in ("port_unlocode", "vessel_name", "shipper", "commodity"))

    def values(rows: pd.DataFrame) -> list[list]:
        rows = rows.sort_values("id").reset_index(drop=True)
        return [[None if pd.isna(v) else v for v in row] for row in rows.astype(object).itertuples(index=False)]

    assert values(coded) == values(merge(plain, mode))


@settings(max_examples=40, deadline=None)
@given(records_lists, st.sampled_from(["all", "by_source"]))
def test_keys_too_wide_for_one_int64_take_the_slower_path_to_the_same_rows(records, mode):
    records_frame = frame(*records)
    expected = merge(records_frame, mode)
    with mock.patch.object(merge_plan, "_INT64_ROOM", 1):
        pd.testing.assert_frame_equal(merge(records_frame, mode), expected)


@fast
@given(records_lists)
def test_by_source_rows_each_have_one_feed(records):
    rows = merge(frame(*records), "by_source")
    assert not rows["source_id"].str.contains(";").any()
    assert (rows["source_name"] == rows["source_id"].map(FEED_NAMES)).all()


@fast
@given(records_lists)
def test_latest_keeps_one_row_per_vessel_and_port(records):
    rows = merge(frame(*records), "all")
    latest = apply_latest(rows)
    assert not latest.duplicated(["vessel_key", "port_unlocode"]).any()
    assert set(zip(latest["vessel_key"], latest["port_unlocode"])) == set(
        zip(rows["vessel_key"], rows["port_unlocode"])
    )


@settings(max_examples=5, deadline=None)
@given(st.lists(records_lists, min_size=3, max_size=3))
def test_ids_are_the_same_in_every_run_and_every_process(tmp_path_factory, datasets):
    path = tmp_path_factory.mktemp("ids") / "frames.pickle"
    frames = [frame(*records) for records in datasets]
    path.write_bytes(pickle.dumps(frames))
    here = [sorted(merge(f, mode)["id"]) for f in frames for mode in ("all", "by_source")]
    again = [sorted(merge(f, mode)["id"]) for f in frames for mode in ("all", "by_source")]
    assert here == again
    script = (
        "import json, pickle, sys\n"
        "from store.merging.merge import merge\n"
        "frames = pickle.load(open(sys.argv[1], 'rb'))\n"
        "print(json.dumps([sorted(merge(f, m)['id']) for f in frames for m in ('all', 'by_source')]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(done.stdout) == here


@fast
@given(records_lists, st.sets(st.sampled_from([FEED_A, FEED_B, FEED_C]), min_size=1))
def test_a_feed_the_buyer_cannot_see_resolves_none_of_their_records(records, visible):
    """Issue 19 rule 1: a buyer's rows come from their feeds' records only. The view's
    upkeep resolves with the identities the store gives for the visible feeds
    (`load_identities`); they must give the rows of the visible records alone, and
    every IMO a name-only record is merged as is carried by a visible record of that
    name, whatever the invisible feeds say."""
    mine = [r for r in records if r["source_id"] in visible]
    rows, membership, resolution = merge_resolved(frame(*mine), "all")
    stored = Identities.of_triples(
        (r["vessel_name"], r["vessel_key"], r["source_name"]) for r in mine if r["vessel_key"].startswith("IMO")
    )
    again = merge(frame(*mine), "all", stored)
    pd.testing.assert_frame_equal(rows.sort_values("id").reset_index(drop=True), again.sort_values("id").reset_index(drop=True))
    for r, name, key in zip(mine, resolution.vessel_from, resolution.frame["vessel_key"]):
        if isinstance(name, str):
            assert any(
                o["vessel_key"] == key and o["vessel_name"] and "NAME:" + vessel_name_key(o["vessel_name"]) == name
                for o in mine
            )
