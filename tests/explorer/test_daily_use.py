"""Issue 45 items 3-10 in real headless Chromium: the explorer fit for a buyer's day
(the calls that have not departed, comparable quantities, the table's view in the
address, a page that comes back after its server did, bad input said).

Each test acts as a buyer would, on `python -m explorer` over the default demo data,
and asserts what the buyer sees; each failed before its change.
"""

from __future__ import annotations

import datetime as dt
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from browsing import Server, browser, chromium_or_skip, new_page, page, row_count, served, sign_in

pytestmark = pytest.mark.browser
chromium_or_skip()
__all__ = ["browser", "page", "served"]  # fixtures
TODAY = dt.datetime.now(dt.timezone.utc).date()


def expect_text(page, selector: str, text: str):
    from playwright.sync_api import expect

    expect(page.locator(selector).first).to_contain_text(text)


# ---------------------------------------------------------------- 8
def test_after_a_lost_connection_the_page_comes_back_by_itself_and_log_out_stays_usable(browser, served):
    """Item 8: the banner does not cover Log out, the screens take no input while the
    server is away (no filter over rows of another), and the page reloads by itself
    once the server is back, showing the filters of its address."""
    from playwright.sync_api import expect

    server = Server(served["db_url"], served["folder"])
    site = {"base_url": server.base_url, "api_key": served["api_key"]}
    page = new_page(browser, site)
    try:
        sign_in(page, site, "/explorer?port=BRSSZ")
        expect(page.locator(".offline-banner")).to_be_attached(timeout=15_000)
        server.stop()
        banner = page.locator(".offline-banner")
        expect(banner).to_be_visible(timeout=30_000)
        expect(banner).to_contain_text("reloads by itself")
        # Log out is in view and nothing covers it (a trial click checks what the
        # pointer would hit); the screens below the header take no input.
        page.locator("a.logout").click(trial=True, timeout=10_000)
        assert page.evaluate("""() => {
          for (const root of Object.values(Bokeh.index))
            for (const v of root.owner.query((v) => v.model.css_classes?.includes("explorer-tabs")))
              return v.el.inert === true
          return false
        }""")
        server = Server(served["db_url"], served["folder"], port=server.port)
        # Back by itself: a new page over the same address, its rows of its filters.
        expect(banner).to_be_hidden(timeout=60_000)
        page.locator(".lineups-table .tabulator-row").first.wait_for(timeout=60_000)
        expect_text(page, ".row-count", "Port BRSSZ")
        expect(page.locator(".offline-banner")).to_be_hidden()
    finally:
        page.context.close()
        server.stop()


#: The focused element, through the shadow roots: its classes and its text.
_FOCUSED = """() => {
  let e = document.activeElement
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement
  return e ? {classes: String(e.className || ""), text: (e.textContent || "").trim().slice(0, 80)} : null
}"""


def focused(page) -> dict:
    return page.evaluate(_FOCUSED) or {"classes": "", "text": ""}


# ---------------------------------------------------------------- 3
def test_the_table_is_one_tab_stop_with_arrow_keys_and_enter_moves_to_the_detail(page, served):
    """Item 3: after Log out come the screen tabs; the table is one stop among the
    controls (not 450), the arrow keys move between rows, Enter opens the detail and
    moves the focus to it, scrolled into view."""
    from playwright.sync_api import expect

    sign_in(page, served, "/explorer?source=all")
    page.locator("a.logout").focus()
    page.keyboard.press("Tab")
    assert "bk-tab" in focused(page)["classes"] and focused(page)["text"] == "Lineups"
    # From the first row, one Tab leaves the table: no cell, no other row, is a stop.
    stops = []
    for _ in range(60):
        page.keyboard.press("Tab")
        stops.append(focused(page))
        if "tabulator-row" in stops[-1]["classes"]:
            break
    assert "tabulator-row" in stops[-1]["classes"], stops
    first = stops[-1]["text"]
    page.keyboard.press("Tab")
    after = focused(page)
    assert "tabulator" not in after["classes"] and after["text"] != first, after
    page.keyboard.press("Shift+Tab")
    assert focused(page)["text"] == first
    # The arrow keys move between rows; the row reached is the table's stop.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    rows = page.locator(".lineups-table .tabulator-row")
    vessel = rows.nth(2).locator("[tabulator-field=vessel]").inner_text().removeprefix("⚠ ").strip()
    assert focused(page)["text"] == rows.nth(2).text_content().strip()[:80]
    page.keyboard.press("ArrowUp")
    assert focused(page)["text"] == rows.nth(1).text_content().strip()[:80]
    page.keyboard.press("ArrowDown")
    expect(rows.nth(2)).to_have_attribute("tabindex", "0")
    expect(page.locator(".lineups-table .tabulator-row[tabindex='0']")).to_have_count(1)
    # Enter: the detail of that row, focused and in view.
    page.keyboard.press("Enter")
    detail = page.locator(".row-detail").first
    expect(detail).to_contain_text(vessel)
    page.wait_for_function(f"() => {{ const f = {_FOCUSED}; const e = f(); return e && e.classes.includes('row-detail') }}")
    expect(detail).to_be_in_viewport()
