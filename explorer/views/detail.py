"""Row detail: who said what about a merged row, and how its ETA moved (issue 17,
item 4).

`provenance_lines` turns the merge engine's explanation (`explorer.data.explain`: the
row's records, each field's value with the records that supplied it and the rule
that made it, and the fields on which the records disagree) into one line per field:
Field · Value · From feed (the feed's record id and when it was updated), with the
other feeds' values beneath when they really differ. `detail_view` draws them as one
table that wraps its text, so a value and its supplier are always on screen together
(no horizontal or nested scroll). The rule texts are the store's, shown as given.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from typing import Any

import pandas as pd
import panel as pn

from explorer.markup import html_text, md
from store.normalize import vessel_name_key
from store.fields import RECORD_FIELDS

#: Field names as a buyer reads them.
FIELD_LABELS = {
    "source_name": "Feeds", "port_unlocode": "Port code", "port_name": "Port", "country_name": "Country",
    "berth_terminal": "Berth / terminal", "vessel_imo": "IMO number", "vessel_name": "Vessel", "vessel_type": "Vessel type",
    "dwt": "Deadweight (t)", "operation": "Operation", "commodity": "Commodity (as reported)",
    "commodity_normalized": "Commodity", "commodity_normalized_group": "Commodity group",
    "commodity_normalized_subgroup": "Commodity subgroup", "quantity": "Quantity", "quantity_unit": "Unit",
    "eta": "ETA (UTC)", "etb": "ETB (UTC)", "etd": "ETD (UTC)", "combined_date": "First date (UTC)",
    "vessel_status": "Status", "shipper": "Shipper", "receiver": "Receiver", "charterer": "Charterer",
    "operator": "Operator", "ship_agent": "Ship agent", "created_at": "First received (UTC)",
    "updated_at": "Last updated (UTC)",
}
TIME_FIELDS = ("eta", "etb", "etd", "combined_date", "created_at", "updated_at")
NUMBER_FIELDS = ("quantity", "dwt")
_WORDS = re.compile(r"[^\w]+")
DETAIL_CSS = """
:host { width: 100%; }
table.provenance { width: 100%; border-collapse: collapse; table-layout: fixed; font-size: 14px; }
table.provenance th, table.provenance td { text-align: left; vertical-align: top; padding: 6px 8px;
  border-bottom: 1px solid #e3e7eb; overflow-wrap: anywhere; }
table.provenance th { background: #f4f6f8; font-weight: 600; }
table.provenance col.field { width: 22%; } table.provenance col.value { width: 38%; } table.provenance col.from { width: 40%; }
.rule { display: block; color: #66707a; font-size: 12px; font-weight: normal; }
.others { display: block; margin-top: 4px; color: #a30000; font-size: 13px; }
.when { color: #66707a; }
.resolved { background: #eef6ee; border-left: 4px solid #4a9a5a; padding: 6px 10px; margin: 6px 0; }
.resolved ul { margin: 4px 0 0 18px; padding: 0; }
.duplicate { background: #fff6e0; border-left: 4px solid #e5ae38; padding: 6px 10px; margin: 6px 0; }
"""


def field_label(field: str) -> str:
    return FIELD_LABELS.get(field, field.replace("_", " ").capitalize())


def display_value(field: str, value: Any) -> str:
    """A value as a buyer reads it: times as `YYYY-MM-DD HH:MM`, numbers with
    thousands separators, operations in words, feed lists one after the other."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if field in TIME_FIELDS and isinstance(value, str):
        return value.replace("T", " ").rstrip("Z")[:16]
    if field in NUMBER_FIELDS:
        try:
            return f"{float(value):,.0f}"
        except (TypeError, ValueError):
            return str(value)
    if field == "operation":
        return {"load": "Load", "disch": "Discharge"}.get(str(value), str(value))
    if field in ("source_name", "source_id"):
        return "; ".join(str(value).split(";"))
    return str(value)


def _same(field: str, a: Any, b: Any) -> bool:
    """Whether two reported values say the same once written alike (case, spacing,
    punctuation, an MV prefix, 55000 and 55000.0, times to the minute)."""
    if field in NUMBER_FIELDS:
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            pass
    if field == "vessel_name":
        return _name(a) == _name(b)
    return _WORDS.sub(" ", display_value(field, a)).casefold().split() == _WORDS.sub(" ", display_value(field, b)).casefold().split()


def _name(value: Any) -> Any:
    return vessel_name_key(value) if isinstance(value, str) else value


def resolution_lines(explained: dict[str, Any]) -> list[str]:
    """What the merge resolved to make the row (issue 19 rule 4), one sentence each:
    "IMO 9345934 from Alpha Lineups, matched by name HARMONY PACIFIC"."""
    return [r["text"] for r in explained.get("resolutions", [])]


def resolutions_html(lines: list[str]) -> str:
    items = "".join(f"<li>{html_text(line)}</li>" for line in lines)
    return f"<div class='resolved'>Merged as one call: <ul>{items}</ul></div>"


def _when(text: str | None) -> str:
    return display_value("updated_at", text) if text else ""


def provenance_lines(explained: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per field that has a value or a real disagreement (the row's own id
    and feed ids left out): `field` (its name), `label`, `value` (as shown), `from`
    (feed, ref, updated time of each record that supplied it), `rule` (the store's
    text) and `others` (each other value and the feeds that gave it)."""
    records = explained.get("records", [])
    by_ref = {(r.get("source_id"), r.get("ref")): r for r in records}
    names = {r["source_id"]: r.get("source_name") or r["source_id"] for r in records}
    lines = []
    for field in RECORD_FIELDS:
        if field in ("id", "source_id"):
            continue
        info = explained.get("fields", {}).get(field, {})
        value = info.get("value")
        others = _other_values(field, value, explained, names)
        if value is None and not others:
            continue
        suppliers = []
        for who in info.get("supplied_by", []):
            record = by_ref.get((who.get("source_id"), who.get("ref")), {})
            suppliers.append(
                {"feed": names.get(who.get("source_id"), who.get("source_id")), "ref": who.get("ref"),
                 "updated": _when(record.get("updated_at"))}
            )
        lines.append(
            {"field": field, "label": field_label(field), "value": display_value(field, value), "from": suppliers,
             "rule": info.get("rule", ""), "others": others}
        )
    return lines


def _other_values(field: str, value: Any, explained: dict[str, Any], names: dict[str, str]) -> list[dict[str, Any]]:
    """The values other feeds gave for `field` that differ from `value` even once
    written alike; none when the disagreement normalises away."""
    for disagreement in explained.get("disagreements", []):
        if disagreement["field"] != field:
            continue
        distinct: list[dict[str, Any]] = []
        for entry in disagreement["values"]:
            if _same(field, entry["value"], value) or any(_same(field, entry["value"], d["raw"]) for d in distinct):
                continue
            feeds = sorted({names.get(r.get("source_id"), r.get("source_name") or "?") for r in entry["records"]})
            distinct.append({"raw": entry["value"], "value": display_value(field, entry["value"]), "feeds": feeds})
        return [{"value": d["value"], "feeds": d["feeds"]} for d in distinct]
    return []


def provenance_frame(explained: dict[str, Any]) -> pd.DataFrame:
    """`provenance_lines` as a frame: field, value, from (text), others (text), rule."""
    return pd.DataFrame(
        [
            {
                "field": line["field"], "value": line["value"], "from": _from_text(line["from"]),
                "others": "; ".join(f"{o['value']} ({', '.join(o['feeds'])})" for o in line["others"]),
                "rule": line["rule"],
            }
            for line in provenance_lines(explained)
        ],
        columns=["field", "value", "from", "others", "rule"],
    )


def _from_text(suppliers: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{s['feed']} (record {s['ref']}{', updated ' + s['updated'] if s['updated'] else ''})" for s in suppliers
    )


def common_rule(lines: list[dict[str, Any]]) -> str:
    """The rule most fields share (the most recently updated record's value): said
    once above the table, and under a field only where its rule is another (issue 45
    item 6: the same rule was repeated 27 times)."""
    rules = Counter(line["rule"] for line in lines if line["rule"])
    return rules.most_common(1)[0][0] if rules else ""


def why_one_call(explained: dict[str, Any]) -> list[str]:
    """Why the records are one call, in plain sentences (issue 45 item 6): the merge
    key (vessel by IMO or name, port, commodity), the ±7-day chain and the agreeing
    counterparties; and, where records were updated at the same time, the rule that
    broke the tie (the lower feed id, then the lower record ref, C2.5)."""
    fields = {name: info.get("value") for name, info in explained.get("fields", {}).items()}
    records = explained.get("records", [])
    vessel = f"IMO {fields['vessel_imo']}" if fields.get("vessel_imo") else f"the name {fields.get('vessel_name') or '?'}"
    commodity = fields.get("commodity_normalized") or f"the reported text “{fields.get('commodity') or '?'}”"
    out = [f"One call: the same vessel ({vessel}), port ({fields.get('port_unlocode')}) and commodity ({commodity})."]
    if len(records) > 1:
        agreed = [f"{name} {fields[name]}" for name in ("shipper", "receiver", "charterer") if fields.get(name)]
        out.append(
            "Each record's first date (ETA, else ETB, else ETD) lies within 7 days of another's, and "
            + (f"they agree on {', '.join(agreed)} (no record names another)." if agreed
               else "none names a shipper, receiver or charterer that another contradicts.")
        )
    by_time: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_time.setdefault(record.get("updated_at") or "", []).append(record)
    for when, tied in by_time.items():
        if when and len(tied) > 1:
            first = min(tied, key=lambda r: (str(r.get("source_id")), str(r.get("ref"))))
            out.append(
                f"{len(tied)} records were updated at the same time ({display_value('updated_at', when)}): the tie goes "
                f"to the lower feed id, then the lower record ref, so {first.get('source_name')} record "
                f"{first.get('ref')} comes first."
            )
    return out


def provenance_html(lines: list[dict[str, Any]]) -> str:
    e = html_text
    shared = common_rule(lines)
    body = []
    for line in lines:
        froms = "<br>".join(
            f"<b>{e(str(s['feed']))}</b> <span class='when'>record {e(str(s['ref']))}"
            f"{', updated ' + e(s['updated']) if s['updated'] else ''}</span>"
            for s in line["from"]
        ) or "<span class='when'>computed from the row</span>"
        others = "".join(
            f"<span class='others'>{e(', '.join(o['feeds']))} said: <b>{e(o['value'])}</b></span>" for o in line["others"]
        )
        rule = f"<span class='rule'>{e(line['rule'])}</span>" if line["rule"] and line["rule"] != shared else ""
        body.append(
            f"<tr data-field='{html.escape(line['field'])}'><th scope='row'>{e(line['label'])}{rule}</th>"
            f"<td class='value'>{e(line['value']) if line['value'] else '<i>blank</i>'}{others}</td><td class='from'>{froms}</td></tr>"
        )
    caption = f"<p class='rule'>Unless a field says otherwise: {e(shared)}.</p>" if shared else ""
    return (
        caption + "<table class='provenance'><colgroup><col class='field'><col class='value'><col class='from'></colgroup>"
        "<thead><tr><th>Field</th><th>Value</th><th>From feed</th></tr></thead><tbody>"
        + "".join(body) + "</tbody></table>"
    )


def eta_frame(eta: list[dict[str, Any]]) -> pd.DataFrame:
    """One line per record: feed, ref, first and current ETA, slip in hours, and every
    ETA it announced."""
    return pd.DataFrame(
        [
            {
                "feed": e["feed"],
                "ref": e["ref"],
                "first_eta": display_value("eta", e["first_eta"]),
                "current_eta": display_value("eta", e["current_eta"]),
                "slip_hours": e["slip_hours"],
                "revisions": len(e["etas"]),
                "etas": " → ".join(display_value("eta", t) or "blank" for t in e["etas"]),
            }
            for e in eta
        ],
        columns=["feed", "ref", "first_eta", "current_eta", "slip_hours", "revisions", "etas"],
    )


def eta_html(eta: list[dict[str, Any]]) -> str:
    e = html_text
    rows = "".join(
        f"<tr><th scope='row'>{e(r['feed'])} <span class='when'>record {e(str(r['ref']))}</span></th>"
        f"<td>{e(r['etas'])}</td><td>{_hours(r['slip_hours'])}</td></tr>"
        for r in eta_frame(eta).to_dict("records")
    )
    return (
        "<table class='provenance eta'><colgroup><col class='field'><col class='value'><col class='from'></colgroup>"
        "<thead><tr><th>Feed</th><th>ETAs announced (UTC), oldest first</th><th>Moved since first</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _hours(value) -> str:
    return "" if value is None or pd.isna(value) else f"{value:+.1f} h"


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
        return pn.pane.Markdown("*Select a row (click it, or Enter) to see who reported what.*", css_classes=["detail-hint"])
    if "error" in detail:
        return pn.pane.Alert(md(detail["error"]), alert_type="warning", css_classes=["detail-error"])
    explained = detail["explain"]
    fields = {name: info.get("value") for name, info in explained.get("fields", {}).items()}
    records = explained.get("records", [])
    lines = provenance_lines(explained)
    title = pn.pane.Markdown(
        f"### {md(fields.get('vessel_name') or fields.get('vessel_imo') or 'Vessel')} at "
        f"{md(fields.get('port_name') or fields.get('port_unlocode'))} · "
        f"{md(fields.get('commodity_normalized') or fields.get('commodity'))}",
        css_classes=["detail-title"],
    )
    feeds = sorted({r.get("source_name") or "?" for r in records})
    differing = sum(bool(line["others"]) for line in lines)
    facts = (
        f"Reported by **{len(records)} record{'s' if len(records) != 1 else ''}** from "
        f"{', '.join(md(feed) for feed in feeds)}{' (each feed on its own row)' if explained.get('merge') == 'by_source' else ''}. "
        + (f"The feeds disagree on **{differing} field{'s' if differing != 1 else ''}** (in red)." if differing
           else "The feeds agree on every field they report.")
    )
    why = "  \n".join(md(sentence) for sentence in why_one_call(explained))
    parts = [title, pn.pane.Markdown(facts, css_classes=["detail-facts"]), pn.pane.Markdown(why, css_classes=["detail-why"])]
    resolved = resolution_lines(explained)
    if resolved:
        parts.append(pn.pane.HTML(resolutions_html(resolved), stylesheets=[DETAIL_CSS], sizing_mode="stretch_width",
                                  css_classes=["resolutions-note"]))
    if detail.get("duplicate"):
        parts.append(pn.pane.HTML(f"<div class='duplicate'>⚠ This row is a {html_text(detail['duplicate'])}.</div>",
                                  stylesheets=[DETAIL_CSS], sizing_mode="stretch_width", css_classes=["duplicate-note"]))
    parts += [
        pn.pane.HTML(provenance_html(lines), stylesheets=[DETAIL_CSS], sizing_mode="stretch_width",
                     css_classes=["provenance-table"]),
        "#### ETA revisions",
        pn.pane.Markdown(slip_summary(detail.get("eta", [])), css_classes=["eta-summary"]),
        pn.pane.HTML(eta_html(detail.get("eta", [])), stylesheets=[DETAIL_CSS], sizing_mode="stretch_width",
                     css_classes=["eta-table"]),
    ]
    return pn.Column(*parts, sizing_mode="stretch_width", css_classes=["row-detail"])
