"""The share links screen: create a link from the current filters, copy its URL or
spreadsheet formula, list the buyer's links and revoke one after a confirmation."""

from __future__ import annotations

import weakref

import panel as pn
import param
from panel.links import Callback
from panel.viewable import Viewer

from explorer.markup import md
from explorer.shares import SharesModel

#: Copies the text of `source` (a TextInput); falls back to a hidden textarea where
#: the Clipboard API is not available (plain http on a non-local host).
COPY_JS = """
const text = source.value;
function fallback() {
  const area = document.createElement('textarea');
  area.value = text; area.setAttribute('readonly', ''); area.style.position = 'fixed'; area.style.opacity = '0';
  document.body.appendChild(area); area.select(); document.execCommand('copy'); document.body.removeChild(area);
}
if (navigator.clipboard && window.isSecureContext) {
  navigator.clipboard.writeText(text).catch(fallback);
} else {
  fallback();
}
button.label = 'Copied';
setTimeout(() => { button.label = label; }, 1500);
"""


def copy_button(source: pn.widgets.TextInput, label: str) -> pn.widgets.Button:
    """A small button that copies `source`'s text to the clipboard in the browser."""
    button = pn.widgets.Button(label=label, color="default", variant="outline", width=120, margin=(28, 5, 5, 5), css_classes=["copy-button"])
    button.js_on_click(args={"source": source, "button": button, "label": label}, code=COPY_JS)
    _forget_with_the_session(button)
    return button


def _forget_with_the_session(button: pn.widgets.Button) -> None:
    """Drop the button's JS callback when its session is destroyed. Panel's callback
    registry is keyed weakly by the button but holds the callback's args strongly,
    and they lead back to the button: without this, every closed session (its rows,
    table and charts) stayed in memory for good (tests/reliability)."""
    document = pn.state.curdoc
    if document is None:  # built outside a served session (tests): nothing to end
        return
    ref = weakref.ref(button)

    def forget(_session_context) -> None:
        alive = ref()
        if alive is not None:
            Callback.registry.pop(alive, None)

    document.on_session_destroyed(forget)


ACTION_CSS = """
.tabulator-cell[tabulator-field='copy'], .tabulator-cell[tabulator-field='revoke'] {
  color: #0b5cab; text-decoration: underline; cursor: pointer; font-weight: 600; }
.tabulator-cell[tabulator-field='revoke'] { color: #a30000; }
"""


class SharesView(Viewer):
    """Create, list and revoke share links (C8)."""

    model = param.ClassSelector(class_=SharesModel, constant=True)

    def __init__(self, **params):
        super().__init__(**params)
        model = self.model
        self._create = pn.widgets.Button.from_param(
            model.param.create, color="primary", width=200, margin=(27, 10, 10, 10), css_classes=["create-link"]
        )
        self._url = pn.widgets.TextInput.from_param(
            model.param.url, name="Link URL", disabled=False, sizing_mode="stretch_width", css_classes=["link-url"]
        )
        self._formula = pn.widgets.TextInput.from_param(
            model.param.formula, name="Spreadsheet formula", sizing_mode="stretch_width", css_classes=["link-formula"]
        )
        self._name = pn.widgets.TextInput.from_param(
            model.param.link_name, placeholder="e.g. Santos soybeans, weekly report", width=320, css_classes=["link-name"],
        )
        self._links = pn.widgets.Tabulator(
            model.table, hidden_columns=["id"], disabled=True,
            show_index=False, selectable=False, layout="fit_columns", sizing_mode="stretch_width",
            # The link's name and filters take the room left and wrap; the actions stay on screen.
            widths={"created": 120, "last_used": 120, "uses": 70, "status": 100, "copy": 85, "revoke": 70},
            formatters={"filters": {"type": "textarea"}, "created": {"type": "textarea"},
                        "last_used": {"type": "textarea"}, "status": {"type": "textarea"}},
            titles={"filters": "Link", "created": "Created (UTC)", "last_used": "Last used (UTC)", "uses": "Uses",
                    "status": "Status", "copy": "", "revoke": ""},
            css_classes=["links-table"], height=360, stylesheets=[ACTION_CSS],
            # Headers wrap rather than cut ("Created (U…"); the action columns sort nothing.
            sortable={"copy": False, "revoke": False},
            configuration={"columnDefaults": {"headerWordWrap": True}},
        )
        self._links.on_click(self._clicked)
        # Built once and shown or hidden: the URL widgets stay the same objects.
        created = model.param.url.rx.bool()
        self._hint = pn.pane.Markdown(
            "A share link serves the whole result of your current filters as CSV, "
            "so a spreadsheet can import it and stay up to date.",
            visible=created.rx.not_(), css_classes=["link-hint"],
        )
        self._created = pn.Column(
            pn.pane.Markdown(model.param.created_summary.rx.pipe(lambda text: f"**Link:** {md(text)}"), css_classes=["created-link"]),
            pn.Row(self._url, copy_button(self._url, "Copy URL"), sizing_mode="stretch_width"),
            pn.Row(self._formula, copy_button(self._formula, "Copy formula"), sizing_mode="stretch_width"),
            pn.pane.Markdown(
                "Paste the formula into a cell of Google Sheets (`IMPORTDATA`); in Excel use "
                "*Data → From Web* with the URL.", css_classes=["formula-hint"],
            ),
            visible=created, sizing_mode="stretch_width",
        )

    def _clicked(self, event) -> None:
        if event.column not in ("copy", "revoke"):
            return
        listed = self.model.table()
        if not 0 <= event.row < len(listed) or not listed[event.column].iloc[event.row]:
            return  # a revoked link: no action in its cell
        link_id = str(listed["id"].iloc[event.row])
        if event.column == "revoke":
            self.model.request_revoke(link_id)
        else:
            self.model.copy_id = link_id

    @param.depends("model.filters.param")
    def _current(self):
        return pn.pane.Markdown(
            f"**Current filters:** {md(self.model.filters.describe(self.model.account.feed_names))}",
            css_classes=["current-filters"],
        )

    @param.depends("model.error", "model.notice")
    def _messages(self):
        if self.model.error:
            return pn.pane.Alert(md(self.model.error), alert_type="warning", css_classes=["share-error"])
        if self.model.notice:
            return pn.pane.Alert(md(self.model.notice), alert_type="success", css_classes=["share-notice"])
        return pn.Spacer(height=0)

    @param.depends("model.pending_revoke")
    def _confirmation(self):
        if not self.model.pending_revoke:
            return pn.Spacer(height=0)
        return pn.Column(
            pn.pane.Alert(
                f"**Revoke this link?** {md(self.model.pending_summary())}. Spreadsheets and scripts using "
                "this link will stop updating. This cannot be undone.",
                alert_type="warning",
            ),
            pn.Row(
                pn.widgets.Button.from_param(self.model.param.confirm_revoke, color="danger", css_classes=["confirm-revoke"]),
                pn.widgets.Button.from_param(self.model.param.cancel_revoke, color="default", css_classes=["cancel-revoke"]),
            ),
            css_classes=["revoke-confirmation"], sizing_mode="stretch_width",
        )

    def __panel__(self):
        return pn.Column(
            "## Share links",
            self._current,
            pn.Row(self._name, self._create, css_classes=["create-row"]),
            self._messages,
            self._hint,
            self._created,
            # A rule of its own: Panel's Divider asks its stylesheet of Panel's CDN, which the
            # explorer's policy (explorer.headers) refuses and a closed network cannot reach.
            pn.pane.HTML("<hr style='border: 0; border-top: 1px solid #e3e7eb'>", sizing_mode="stretch_width"),
            pn.Row("### Your links", pn.widgets.Checkbox.from_param(self.model.param.show_revoked, margin=(22, 20), css_classes=["show-revoked"])),
            self._confirmation,
            self._links,
            sizing_mode="stretch_width", max_width=1200,
        )
