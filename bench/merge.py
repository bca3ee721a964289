"""What building a view costs: the merge engine (contract C2, `store.merging.merge`) cold
on a large synthetic store, against a straightforward pandas merge.

    python -m bench merge [--records N] [--runs 3]

Builds a deterministic record frame shaped like the store's (default 1,000,000 records:
200,000 vessel calls, 20 feeds, each call reported by about 5 feeds with a few days of
ETA jitter, about 1% of calls with a counterparty disagreement, blanks everywhere),
then times `merge` cold against `baseline_merge` (sort, diff/cumsum, groupby-last; it
ignores counterparty splits and ids, so it does less work), and its peak memory.
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc

import numpy as np
import pandas as pd

from bench.figures import Figure, Run, Target, command
from store.merging import columns
from store.merging.merge import merge

MIB = 2**20

DAY = 86_400
FEEDS = 20
START = pd.Timestamp("2024-01-01", tz="UTC").value // 10**9


def make_records(n: int = 1_000_000, seed: int = 7) -> pd.DataFrame:
    """A store-like record frame of about `n` records (see the module docstring)."""
    rng = np.random.default_rng(seed)
    calls = max(n // 5, 1)
    feeds = np.array([f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(FEEDS)], dtype=object)
    names = np.array([f"Feed {chr(65 + i % 26)}{i}" for i in range(FEEDS)], dtype=object)
    call = np.sort(rng.integers(0, calls, n))  # ~5 records per call
    feed = rng.integers(0, FEEDS, n)
    vessel = rng.integers(0, max(calls // 10, 1), calls)
    port = rng.integers(0, 150, calls)
    commodity = rng.integers(0, 60, calls)
    eta = START + rng.integers(0, 730 * DAY, calls)
    company = _pool("Company", 3000)
    parties = {f: rng.integers(0, len(company), calls) for f in ("shipper", "receiver", "charterer")}

    r_eta = eta[call] + rng.integers(-3 * DAY, 3 * DAY, n)
    r_etb = r_eta + rng.integers(0, 2 * DAY, n)
    r_etd = r_etb + rng.integers(DAY, 4 * DAY, n)
    updated = START + rng.integers(0, 800 * DAY, n)
    frame = pd.DataFrame(
        {
            "ref": pd.Series([f"R{i}" for i in range(n)], dtype=object),
            "source_id": pd.Series(feeds[feed], dtype=object),
            "source_name": pd.Series(names[feed], dtype=object),
            "vessel_key": _text(np.array([f"IMO{9000000 + v}" for v in range(calls // 10 + 1)], dtype=object)[vessel[call]]),
            "commodity_key": _text(_pool("dry-bulk/coal/leaf", 60)[commodity[call]]),
            "port_unlocode": _text(_pool("NL", 150, width=3)[port[call]]),
            "port_name": _blanked(rng, _pool("Port", 150)[port[call]], 0.05),
            "country_name": _blanked(rng, _pool("Country", 40)[port[call] % 40], 0.05),
            "berth_terminal": _blanked(rng, _pool("Berth", 400)[rng.integers(0, 400, n)], 0.4),
            "vessel_imo": _text(np.array([str(9000000 + v) for v in range(calls // 10 + 1)], dtype=object)[vessel[call]]),
            "vessel_name": _blanked(rng, _pool("Vessel", calls // 10 + 1)[vessel[call]], 0.1),
            "vessel_type": _blanked(rng, np.array(["Bulk Carrier", "Tanker"], dtype=object)[vessel[call] % 2], 0.2),
            "dwt": pd.Series(np.where(rng.random(n) < 0.2, -1, 20000 + vessel[call] % 180000)).replace(-1, pd.NA).astype("Int64"),
            "operation": _blanked(rng, np.array(["load", "disch"], dtype=object)[commodity[call] % 2], 0.1),
            "commodity": _text(_pool("Coal grade", 60)[commodity[call]]),
            "commodity_normalized": _blanked(rng, _pool("Leaf", 60)[commodity[call]], 0.0),
            "commodity_normalized_group": _blanked(rng, _pool("Group", 5)[commodity[call] % 5], 0.0),
            "commodity_normalized_subgroup": _blanked(rng, _pool("Subgroup", 20)[commodity[call] % 20], 0.0),
            "quantity": np.where(rng.random(n) < 0.2, np.nan, rng.integers(1, 200, n) * 1000.0),
            "quantity_unit": _blanked(rng, np.array(["MT"], dtype=object)[np.zeros(n, dtype=int)], 0.2),
            "eta": _times(rng, r_eta, 0.1),
            "etb": _times(rng, r_etb, 0.3),
            "etd": _times(rng, r_etd, 0.3),
            "vessel_status": _blanked(rng, np.array(["expected", "berthed"], dtype=object)[rng.integers(0, 2, n)], 0.3),
            "operator": _blanked(rng, company[rng.integers(0, len(company), n)], 0.5),
            "ship_agent": _blanked(rng, company[rng.integers(0, len(company), n)], 0.5),
            "created_at": _times(rng, updated - rng.integers(0, 30 * DAY, n), 0.0),
            "updated_at": _times(rng, updated, 0.0),
        }
    )
    conflict = rng.random(n) < 0.01 / 5  # one record in ~1% of calls names another shipper
    for field, chosen in parties.items():
        values = company[chosen[call]].copy()
        if field == "shipper":
            values[conflict] = company[(chosen[call][conflict] + 1) % len(company)]
        frame[field] = _blanked(rng, values, 0.3)
    frame.loc[rng.random(n) < 0.005, ["eta", "etb", "etd"]] = pd.NaT  # dateless records
    frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    # Text columns as the store holds them in memory (`store.views.records`, `store.merging.columns`).
    return frame.assign(**{c: columns.category(frame[c]) for c in frame.columns if frame[c].dtype == object and c != "ref"})


def _pool(prefix: str, size: int, width: int = 0) -> np.ndarray:
    if width:
        return np.array([f"{prefix}{i:0{width}d}"[:5] for i in range(size)], dtype=object)
    return np.array([f"{prefix} {i}" for i in range(size)], dtype=object)


def _text(values: np.ndarray) -> pd.Series:
    return pd.Series(values, dtype=object)


def _blanked(rng, values: np.ndarray, share: float) -> pd.Series:
    values = values.copy()
    values[rng.random(len(values)) < share] = None
    return pd.Series(values, dtype=object)


def _times(rng, seconds: np.ndarray, share: float) -> pd.Series:
    ns = seconds.astype(np.int64) * 10**9
    ns[rng.random(len(ns)) < share] = np.iinfo(np.int64).min
    return pd.Series(ns.view("M8[ns]")).dt.tz_localize("UTC")


def baseline_merge(records: pd.DataFrame) -> pd.DataFrame:
    """The straightforward pandas merge the engine is measured against: sort by key and
    anchor, a new group at a key change or a gap over 7 days (diff/cumsum), latest
    non-blank value per group by groupby-last. No counterparty splits, no ids."""
    anchor = records["eta"].fillna(records["etb"]).fillna(records["etd"])
    keys = ["vessel_key", "port_unlocode", "commodity_key"]
    frame = records.assign(_anchor=anchor).sort_values([*keys, "_anchor"])
    new_key = (frame[keys] != frame[keys].shift()).any(axis=1)
    gap = frame["_anchor"].diff() > pd.Timedelta(days=7)
    group = (new_key | gap | frame["_anchor"].isna()).cumsum()
    frame = frame.assign(_group=group.to_numpy()).sort_values(["_group", "updated_at"])
    merged = frame.groupby("_group").last()
    merged["created_at"] = frame.groupby("_group")["created_at"].min()
    return merged


def timed(function, records: pd.DataFrame, runs: int) -> tuple[list[float], object]:
    """Wall times of `runs` cold calls of `function(records)`, and its last result."""
    times, result = [], None
    for _ in range(runs):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = function(records)
        times.append(time.perf_counter() - start)
    return times, result


def peak_traced(function, records: pd.DataFrame) -> int:
    """Peak bytes allocated while `function(records)` ran (tracemalloc; numpy reports
    its buffers to it), beyond what was allocated before."""
    gc.collect()
    tracemalloc.start()
    function(records)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def merge_figures(records: int, runs: int) -> list[Figure]:
    """The cold merge of `records` synthetic records against the straightforward pandas
    merge, and the engine's peak memory."""
    frame = make_records(records)
    engine_times, rows = timed(merge, frame, runs)
    groups = len(rows)
    del rows
    base_times, _ = timed(baseline_merge, frame, runs)
    peaks = [peak_traced(merge, frame) / MIB for _ in range(max(1, runs // 2))]
    del frame
    gc.collect()
    return [
        Figure("merge.cold", "Merge", f"cold merge of {records:,} visible records ({groups:,} rows)", "s",
               engine_times, Target("<=", 1.0),
               ("straightforward pandas merge (sort, diff/cumsum, groupby-last)", statistics.median(base_times))),
        Figure("merge.memory", "Merge", "cold merge: peak memory allocated (tracemalloc)", "MiB", peaks,
               Target("<=", 1.5 * 1024)),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = command("merge", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    run = Run("merge", args.results, argv)
    run.save(merge_figures(args.records, args.runs), args.records, "memory")
    return 0
