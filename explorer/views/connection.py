"""The page's own behaviour in the browser: the banner that tells the buyer the page
lost its server (issue 17, item 3), and keyboard use (item 10).

Bokeh's page raises `connection_lost` on its document when the websocket closes;
the banner then shows at the foot of the window (the header and its Log out stay
in view and usable) with a Reload button, and the screens below the header are
dimmed and take no input (`inert`): a filter changed now would never be applied,
and the page would show it over the rows of another filter (issue 45 item 8). The
page then asks the server for the explorer's address, every few seconds (longer
apart as time passes), and reloads itself once the server answers: a server that
restarted has no session for the page, and the reloaded page shows the filters of
its address, the last ones the server applied. The browser's Back and Forward
buttons reload the page, so that the filters in the address (item 6) are the ones
shown.

Keyboard (issue 45 item 3): the screen tabs come first in the tab order and open with
Enter or Space. A table is one tab stop: its current row (no cell, no scrolling
box); the arrow keys, Home, End, Page Up and Page Down move between its rows, and
Enter or Space opens a row's detail as a click does, then moves the focus to the
detail, scrolled into view. A checkbox's text toggles it, as a label would. Panel
draws every component in its own shadow root, so rows are found by walking them.

Tables in step with their data: Panel's Tabulator (1.9.4) drops a data update
that reaches a table still being built (its `setData` returns early until
Tabulator's asynchronous `tableBuilt`). On a busy machine the first page of rows
could arrive in that window, and the buyer saw the row count over an empty table.
A table that dropped an update is given its model's data again once it is built;
tables already built when this code loads, once more then. The served page loads
it with the page's first document (`explorer.app.explorer_page`), before any table.
"""

from __future__ import annotations

from panel.custom import JSComponent


class ConnectionBanner(JSComponent):
    """Hidden until the connection to the server is lost; also sets up the page's
    keyboard use and keeps its tables in step with their data."""

    _esm = """
    // Panel's DataTabulatorView.setData returns early while its table is being built
    // (until Tabulator's asynchronous tableBuilt), and that data never reaches the table.
    // A table built from now on takes its model's data again once built if an update
    // was dropped so (drawing 50 rows again costs the browser ~0.2 s); tables already
    // built when this module loads (it may load after them) take it again now.
    function keepTablesInStep() {
      const model = window.Bokeh?.Models.get("panel.models.tabulator.DataTabulator")
      const View = model?.prototype.default_view
      if (View == null || View.prototype.lineupsInStep) return
      if (typeof View.prototype.setData !== "function" || typeof View.prototype.tableBuilt !== "function") {
        console.warn("lineups: Panel's Tabulator changed; tables are not kept in step with their data")
        return
      }
      View.prototype.lineupsInStep = true
      const { setData, tableBuilt } = View.prototype
      const refill = (table) => void table.setData().then(() => table.postUpdate())
      View.prototype.setData = function (...args) {
        if (this._initializing || this._building || !this.tabulator?.initialized) this.lineupsDropped = true
        return setData.apply(this, args)
      }
      View.prototype.tableBuilt = function (...args) {
        const built = tableBuilt.apply(this, args)
        if (this.lineupsDropped) {
          this.lineupsDropped = false
          refill(this)
        }
        return built
      }
      for (const root of Object.values(window.Bokeh.index)) {
        for (const table of root.owner.query((v) => v instanceof View)) {
          if (table.tabulator?.initialized && !table._building) refill(table)
        }
      }
    }

    // Every Bokeh view on the page that `test` accepts.
    function views(test) {
      const found = []
      for (const root of Object.values(window.Bokeh?.index ?? {})) found.push(...root.owner.query(test))
      return found
    }

    // Ask the server for this page's address until it answers (any HTTP status: a
    // redirect to the login page too), then reload: 2 s apart, then up to 30 s.
    function reloadWhenBack(text, wait = 2000, since = Date.now()) {
      setTimeout(async () => {
        try {
          await fetch(window.location.href, { cache: "no-store", redirect: "manual", credentials: "same-origin" })
          window.location.reload()
          return
        } catch (refused) {
          if (Date.now() - since > 120000)
            text.textContent = "The server does not answer yet. The page reloads by itself when it is back, or press Reload."
        }
        reloadWhenBack(text, Math.min(wait * 1.5, 30000), since)
      }, wait)
    }

    export function render({ view, el }) {
      keepTablesInStep()
      const bar = document.createElement("div")
      bar.className = "offline-banner"
      bar.setAttribute("role", "alert")
      bar.hidden = true
      const text = document.createElement("span")
      text.textContent = "The connection to the server was lost: what you see may be out of date, and changes are not applied. " +
        "The page reloads by itself when the server is back."
      const button = document.createElement("button")
      button.textContent = "Reload"
      button.addEventListener("click", () => window.location.reload())
      bar.append(text, button)
      el.append(bar)
      view.model.document.on_event("connection_lost", () => {
        bar.hidden = false
        document.body.classList.add("lineups-offline")
        for (const screens of views((v) => v.model.css_classes?.includes("explorer-tabs"))) {
          screens.el.inert = true
          screens.el.style.opacity = "0.45"
        }
        button.focus()
        reloadWhenBack(text)
      })
      window.addEventListener("popstate", () => window.location.reload())
      const activate = (event) => {
        const target = event.composedPath()[0]
        if (!(target instanceof HTMLElement)) return
        if (target.classList.contains("tabulator-row") && moveInTable(target, event.key)) {
          event.preventDefault()
          return
        }
        if (event.key !== "Enter" && event.key !== " ") return
        if (target.classList.contains("bk-tab")) {
          event.preventDefault()
          target.click()
        } else if (target.classList.contains("tabulator-row")) {
          event.preventDefault()
          const before = new Set(views(isDetail).map((v) => v.el))
          target.click()
          focusDetail(before)
        }
      }
      document.addEventListener("keydown", activate, true)
      // A checkbox's text is no <label> in Panel's drawing: make it toggle the box.
      document.addEventListener("click", (event) => {
        const target = event.composedPath()[0]
        if (!(target instanceof HTMLElement) || !target.classList.contains("bk-label")) return
        const box = target.previousElementSibling
        if (box instanceof HTMLInputElement && box.type === "checkbox") box.click()
      }, true)
      // Rows are drawn afresh with every page, and the tabs' header again with its
      // tabs: keep the tab order so (a few elements, checked every 0.7 s).
      setInterval(() => { tabsFirst(); oneStopTables() }, 700)
    }

    const isDetail = (v) => v.model.css_classes?.includes("row-detail") || v.model.css_classes?.includes("detail-error")

    // Issue 45 item 3: the screen tabs come first in the tab order. Bokeh draws their
    // header after the screen (placed above it by the grid): move it to the front.
    function tabsFirst() {
      for (const tabs of views((v) => v.model.css_classes?.includes("explorer-tabs"))) {
        const header = [...tabs.shadow_el.children].find((c) => c.classList.contains("bk-header"))
        const first = [...tabs.shadow_el.children].find((c) => c.tagName !== "STYLE" && c.tagName !== "LINK")
        if (header != null && first !== header) tabs.shadow_el.insertBefore(header, first)
      }
    }

    // Elements of `root` and of the shadow roots within it that match `selector`.
    function deepAll(root, selector, found = []) {
      for (const node of root.querySelectorAll("*")) {
        if (node.matches(selector)) found.push(node)
        if (node.shadowRoot) deepAll(node.shadowRoot, selector, found)
      }
      return found
    }

    // Issue 45 item 3: a table is one tab stop (its current row; cells and the
    // scrolling box are none), the arrow keys move between its rows.
    function oneStopTables() {
      for (const table of views((v) => v.model.css_classes?.includes("lineups-table"))) {
        const root = table.shadow_el ?? table.el
        for (const node of deepAll(root, ".tabulator-cell[tabindex], .tabulator-tableholder[tabindex]")) node.tabIndex = -1
        const rows = deepAll(root, ".tabulator-row")
        const current = rows.find((row) => row.getAttribute("tabindex") === "0") ?? rows[0]
        for (const row of rows) row.tabIndex = row === current ? 0 : -1
      }
    }

    // Arrow keys, Home, End, Page Up and Page Down from a row: focus another row of its
    // table, which becomes the table's tab stop. Returns whether the key moved.
    function moveInTable(row, key) {
      const rows = [...row.parentElement.children].filter((r) => r.classList.contains("tabulator-row"))
      const at = rows.indexOf(row)
      const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: rows.length - 1, PageDown: at + 10, PageUp: at - 10 }[key]
      if (to === undefined) return false
      const next = rows[Math.max(0, Math.min(rows.length - 1, to))]
      row.tabIndex = -1
      next.tabIndex = 0
      next.focus()
      next.scrollIntoView({ block: "nearest" })
      return true
    }

    // After Enter on a row: once its detail is drawn (a new element, not one of
    // `before`), focus it and scroll it into view; give up after 20 s.
    function focusDetail(before, since = Date.now()) {
      const drawn = views(isDetail).map((v) => v.el).find((el) => !before.has(el) && el.isConnected)
      if (drawn != null) {
        drawn.tabIndex = -1
        drawn.focus({ preventScroll: true })
        drawn.scrollIntoView({ block: "start" })
      } else if (Date.now() - since < 20000) {
        setTimeout(() => focusDetail(before, since), 100)
      }
    }
    """

    def __init__(self, **params):
        params.setdefault("stylesheets", [BANNER_CSS])
        super().__init__(**params)


BANNER_CSS = """
        .offline-banner { position: fixed; bottom: 0; left: 0; right: 0; z-index: 10000; display: flex; gap: 16px;
          align-items: center; justify-content: center; background: #a30000; color: #fff; padding: 12px 16px;
          font: 600 15px system-ui, sans-serif; box-shadow: 0 -2px 8px rgba(0,0,0,.3); }
        .offline-banner button { font: inherit; color: #a30000; background: #fff; border: 0; border-radius: 4px;
          padding: 6px 14px; cursor: pointer; }
        .offline-banner[hidden] { display: none; }
"""
