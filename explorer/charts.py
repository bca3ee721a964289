"""The lineups view's charts: the frames they show (pure functions of the selected
rows) and the hvPlot charts drawn from them.

- Quantity by commodity group per week: the sum of `quantity` of the rows measured
  in tonnes (`MT`), by the week (Monday, UTC) of their `combined_date`, stacked by
  commodity group. Barrels and units do not add up with tonnes, so they are left
  out, and the chart says so.
- Vessels by status per port: distinct vessels per port and vessel status.
"""

from __future__ import annotations

import hvplot.pandas  # noqa: F401  (registers DataFrame.hvplot)
import pandas as pd

UNRESOLVED = "Unresolved"
NO_STATUS = "unknown"
STATUS_ORDER = ("expected", "anchored", "berthed", "departed", NO_STATUS)
STATUS_COLORS = {
    "expected": "#8fb8de", "anchored": "#f2b134", "berthed": "#2e8b57",
    "departed": "#7a7a7a", NO_STATUS: "#d0d0d0",
}


def weekly_quantity(rows: pd.DataFrame) -> pd.DataFrame:
    """Columns week (Monday, text), group, kt (thousand tonnes), one row per pair."""
    tonnes = rows[(rows["quantity_unit"] == "MT") & rows["combined_date"].notna() & rows["quantity"].notna()]
    if tonnes.empty:
        return pd.DataFrame({"week": pd.Series(dtype=object), "group": pd.Series(dtype=object), "kt": pd.Series(dtype=float)})
    days = pd.to_datetime(tonnes["combined_date"], utc=True).dt.tz_localize(None).dt.normalize()
    monday = days - pd.to_timedelta(days.dt.day_of_week, unit="D")
    frame = pd.DataFrame(
        {
            "week": monday.dt.strftime("%Y-%m-%d").astype(object),
            "group": tonnes["commodity_normalized_group"].astype(object).where(
                tonnes["commodity_normalized_group"].notna(), UNRESOLVED
            ),
            "kt": pd.to_numeric(tonnes["quantity"], errors="coerce").astype(float) / 1000.0,
        }
    )
    return frame.groupby(["week", "group"], as_index=False)["kt"].sum().sort_values(["week", "group"], ignore_index=True)


def status_by_port(rows: pd.DataFrame) -> pd.DataFrame:
    """Columns port (name and LOCODE), status, vessels: distinct vessels per pair."""
    if rows.empty:
        return pd.DataFrame({"port": pd.Series(dtype=object), "status": pd.Series(dtype=object), "vessels": pd.Series(dtype=int)})
    port = rows["port_name"].astype(object).where(rows["port_name"].notna(), rows["port_unlocode"])
    vessel = rows["vessel_key"] if "vessel_key" in rows else rows["vessel_name"]
    frame = pd.DataFrame(
        {
            "port": (port.astype(str) + " (" + rows["port_unlocode"].astype(str) + ")").astype(object),
            "status": rows["vessel_status"].astype(object).where(rows["vessel_status"].notna(), NO_STATUS),
            "vessel": vessel.astype(object),
        }
    )
    counts = frame.groupby(["port", "status"], as_index=False)["vessel"].nunique()
    counts = counts.rename(columns={"vessel": "vessels"})
    order = {s: i for i, s in enumerate(STATUS_ORDER)}
    counts["_order"] = counts["status"].map(order).fillna(len(order))
    return counts.sort_values(["port", "_order"], ignore_index=True).drop(columns="_order")


def weekly_quantity_chart(frame: pd.DataFrame):
    """Stacked bars of thousand tonnes per week and commodity group."""
    if frame.empty:
        frame = pd.DataFrame({"week": ["–"], "group": [UNRESOLVED], "kt": [0.0]})
    return frame.hvplot.bar(
        x="week", y="kt", by="group", stacked=True, rot=45, height=380, responsive=True,
        title="Quantity by commodity group per week (kt, MT rows)",
        xlabel="Week starting (UTC)", ylabel="thousand tonnes", legend="bottom",
    ).opts(toolbar=None, active_tools=[])


def status_by_port_chart(frame: pd.DataFrame):
    """Horizontal stacked bars of vessels per port, by vessel status."""
    if frame.empty:
        frame = pd.DataFrame({"port": ["–"], "status": [NO_STATUS], "vessels": [0]})
    statuses = [s for s in STATUS_ORDER if s in set(frame["status"])]
    ports = frame["port"].nunique()
    return frame.hvplot.barh(
        x="port", y="vessels", by="status", stacked=True, height=max(240, 28 * ports + 90),
        responsive=True, title="Vessels by status per port", xlabel="", ylabel="vessels",
        color=[STATUS_COLORS[s] for s in statuses], legend="right",
    ).opts(toolbar=None, active_tools=[])
