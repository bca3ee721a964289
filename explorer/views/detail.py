"""Row detail: where a merged row's values came from, where the feeds disagree, and
how its ETA moved (issue 6, "Row detail").

`provenance_frame` turns the merge engine's explanation (`LineupService.explain`:
the row's records, each field's value with the records that supplied it and the rule
that made it, and the fields on which the records disagree) into one line per field.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import panel as pn

from store.fields import RECORD_FIELDS


def _feed(who: dict[str, Any], names: dict[str, str]) -> str:
    return names.get(who.get("source_id"), who.get("source_name") or who.get("source_id") or "?")


def _records_text(records: list[dict[str, Any]], names: dict[str, str]) -> str:
    return ", ".join(f"{_feed(r, names)} ({r.get('ref')})" for r in records)


def provenance_frame(explained: dict[str, Any]) -> pd.DataFrame:
    """Columns field, value, disagreement (each value and who gave it, when the
    records differ), supplied_by (feed and the feed's record id) and rule; one line
    per served field that has a value or a disagreement (the row's own id and feed
    ids left out)."""
    names = {r["source_id"]: r["source_name"] for r in explained.get("records", [])}
    disagreements = {
        d["field"]: " ≠ ".join(
            f"{v['value']} ({', '.join(_feed(r, names) for r in v['records'])})" for v in d["values"]
        )
        for d in explained.get("disagreements", [])
    }
    lines = []
    for field in RECORD_FIELDS:
        if field in ("id", "source_id"):
            continue
        info = explained.get("fields", {}).get(field, {})
        value = info.get("value")
        if value is None and field not in disagreements:
            continue
        lines.append(
            {
                "field": field,
                "value": None if value is None else str(value),
                "supplied_by": _records_text(info.get("supplied_by", []), names),
                "disagreement": disagreements.get(field, ""),
                "rule": info.get("rule", ""),
            }
        )
    return pd.DataFrame(lines, columns=["field", "value", "disagreement", "supplied_by", "rule"])


def eta_frame(eta: list[dict[str, Any]]) -> pd.DataFrame:
    """One line per record: feed, ref, first and current ETA, slip in hours, and every
    ETA it announced."""
    return pd.DataFrame(
        [
            {
                "feed": e["feed"],
                "ref": e["ref"],
                "first_eta": e["first_eta"],
                "current_eta": e["current_eta"],
                "slip_hours": e["slip_hours"],
                "revisions": len(e["etas"]),
                "etas": " → ".join(t or "blank" for t in e["etas"]),
            }
            for e in eta
        ],
        columns=["feed", "ref", "first_eta", "current_eta", "slip_hours", "revisions", "etas"],
    )


def slip_summary(eta: list[dict[str, Any]]) -> str:
    """One sentence on how far the call slipped, by the largest slip of its records."""
    slips = [e["slip_hours"] for e in eta if e["slip_hours"] is not None]
    revised = sum(len(e["etas"]) > 1 for e in eta)
    if not slips or not revised:
        return "No ETA revisions stored for this call: every feed still reports its first ETA."
    worst = max(slips, key=abs)
    direction = "later" if worst > 0 else "earlier"
    return f"The ETA moved {abs(worst):.1f} h {direction} than first announced ({revised} record(s) revised)."


def detail_view(detail: dict[str, Any] | None) -> pn.viewable.Viewable:
    """The detail panel of the selected row (a hint when none is selected)."""
    if detail is None:
        return pn.pane.Markdown("*Select a row to see where its values came from.*", css_classes=["detail-hint"])
    if "error" in detail:
        return pn.pane.Alert(detail["error"], alert_type="warning")
    explained = detail["explain"]
    fields = {name: info.get("value") for name, info in explained.get("fields", {}).items()}
    records = explained.get("records", [])
    provenance = provenance_frame(explained)
    title = (
        f"### {fields.get('vessel_name') or fields.get('vessel_imo') or 'Vessel'} at "
        f"{fields.get('port_name') or fields.get('port_unlocode')} · "
        f"{fields.get('commodity_normalized') or fields.get('commodity')}"
    )
    disagreements = len(explained.get("disagreements", []))
    facts = (
        f"Merged from **{len(records)} record(s)**: "
        f"{_records_text(records, {})} ({explained.get('merge', 'all')} mode). "
        f"The feeds disagree on **{disagreements} field(s)**."
    )
    table = pn.widgets.Tabulator(
        provenance, disabled=True, show_index=False, layout="fit_data_table", sizing_mode="stretch_width",
        selectable=False, frozen_columns=["field"], height=min(560, 32 * len(provenance) + 40),
        css_classes=["provenance-table"],
        stylesheets=[".tabulator-cell[tabulator-field='disagreement'] {color: #a30000; font-weight: 600;}"],
    )
    eta = eta_frame(detail.get("eta", []))
    return pn.Column(
        title,
        pn.pane.Markdown(facts),
        table,
        "#### ETA revisions",
        pn.pane.Markdown(slip_summary(detail.get("eta", [])), css_classes=["eta-summary"]),
        pn.widgets.Tabulator(eta, disabled=True, show_index=False, selectable=False, layout="fit_data_table",
                             sizing_mode="stretch_width", css_classes=["eta-table"]),
        sizing_mode="stretch_width", css_classes=["row-detail"],
    )
