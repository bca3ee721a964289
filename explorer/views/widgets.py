"""Widgets the explorer's forms need beyond Panel's own.

`DateInput` is a text box for a day: typed, pasted or cleared, in the usual ways of
writing a date; what it cannot read leaves the day as it was (issue 17, item 6).
`CommodityPicker` picks commodities from the taxonomy's tree by the start of their
names, one box to type in and a removable chip per choice (item 7); it is one
stop for the Tab key, not one per listed option (item 10).
"""

from __future__ import annotations

import datetime as dt

import panel as pn
import param

#: Ways of writing a day that the box reads (the first is how it shows one).
DAY_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%d/%m/%Y", "%d.%m.%Y", "%d %b %Y", "%d %B %Y", "%b %d %Y", "%B %d %Y", "%Y%m%d")


def parse_day(text: str | None) -> dt.date | None:
    """The day `text` writes, None for an empty text. Raises ValueError otherwise."""
    text = " ".join((text or "").replace(",", " ").split())
    if not text:
        return None
    for form in DAY_FORMATS:
        try:
            return dt.datetime.strptime(text, form).date()
        except ValueError:
            continue
    raise ValueError(f"not a date: {text!r}")


class DateInput(pn.widgets.TextInput):
    """A text box whose value is a day (None when empty). Text that is no day is
    said in the box's title, which the next day read clears (issue 45 item 9)."""

    value = param.CalendarDate(default=None, allow_None=True, doc="The day, or None.")
    problem = param.String(default="", doc="Why the text typed last is no day (empty: it was one).")

    _rename = {**pn.widgets.TextInput._rename, "problem": None}  # the browser's box has no such property

    def __init__(self, **params):
        super().__init__(**params)
        self._title = self.name

    @param.depends("problem", watch=True)
    def _say_problem(self) -> None:
        # The title is plain text in Bokeh's drawing: the typed text stays text.
        self.name = f"{self._title} · {self.problem}" if self.problem else self._title

    def _process_param_change(self, params):
        if "value" in params:
            params["value"] = "" if params["value"] is None else params["value"].isoformat()
        return super()._process_param_change(params)

    def _process_property_change(self, props):
        props = super()._process_property_change(props)
        if "value" in props:
            typed = props["value"]
            try:
                props["value"] = parse_day(typed)
                self.problem = ""
            except ValueError:
                # Unreadable: keep the day, show it again in the box, and say why.
                props.pop("value")
                self.problem = f"“{' '.join(typed.split())[:40]}” is not a date: write YYYY-MM-DD"
                pn.state.execute(lambda: self.param.trigger("value"))
        return props

    def _process_event(self, event) -> None:
        # Enter: Panel's TextInput sets `value` to the raw text, which a day refuses
        # (a traceback in the log, the day left as it was); read it as a day here.
        if event.event_name == "enter-pressed":
            props = self._process_property_change({"value": event.value_input})
            if "value" in props:
                self.value = props["value"]
            self.value_input = event.value_input
            self.enter_pressed = True
            return
        super()._process_event(event)


class CommodityPicker(pn.viewable.Viewer):
    """Several names of a dict of options (label → name), picked by typing the start
    of a label ("Soy" → "Soybeans · Dry Bulk › Grains")."""

    value = param.List(default=[], item_type=str, doc="The picked names, in the order picked.")
    options = param.Dict(default={}, doc="Label → name, in the order to list them.")
    label = param.String(default="Commodity")

    def __init__(self, **params):
        super().__init__(**params)
        self._box = pn.widgets.AutocompleteInput(
            label=self.label, options=list(self.options), search_strategy="starts_with", case_sensitive=False,
            min_characters=1, restrict=True, placeholder="Type a commodity, e.g. Soy", width=250,
            css_classes=["filter-commodity"],
        )
        self._box.param.watch(self._picked, "value")

    def _picked(self, event) -> None:
        name = self.options.get(event.new)
        if name and name not in self.value:
            self.value = [*self.value, name]
        if event.new:
            self._box.value = ""

    def _remove(self, name: str) -> None:
        self.value = [v for v in self.value if v != name]

    @param.depends("value")
    def _chips(self):
        chips = []
        for name in self.value:
            chip = pn.widgets.Button(label=f"{name} ✕", color="light", margin=(2, 3), css_classes=["commodity-chip"])
            chip.on_click(lambda _event, name=name: self._remove(name))
            chips.append(chip)
        return pn.FlexBox(*chips, width=260) if chips else pn.pane.Markdown("*Any commodity*", margin=(0, 10), css_classes=["commodity-any"])

    def __panel__(self):
        return pn.Column(self._box, self._chips, width=270)
