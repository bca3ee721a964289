"""Issue 17 item 9 in real headless Chromium: chart tooltips give exact amounts with
thousands separators, and a click on a bar filters. The bars are found through Bokeh's
own views (`browsing.bar`), so that the mouse goes where a bar is drawn. Its own
module, so its own `python -m explorer` over the demo data."""

from __future__ import annotations

import datetime as dt

import pytest

from browsing import (
    bar, browser, change_filter, chromium_or_skip, page, served, sign_in, tooltip, until_chart_factors_end_with,
)

pytestmark = pytest.mark.browser
chromium_or_skip()
__all__ = ["browser", "page", "served"]  # fixtures


def expect_text(page, selector: str, text: str):
    from playwright.sync_api import expect

    expect(page.locator(selector).first).to_contain_text(text)


def test_chart_tooltips_give_exact_amounts_and_a_click_on_a_bar_filters(page, served):
    from playwright.sync_api import expect

    sign_in(page, served, "/explorer?source=all")
    # Weekly tonnes: the hovered bar's own amount, in whole tonnes with separators.
    week = bar(page, "Quantity by commodity group per week (kt, MT rows)")
    shown = tooltip(page, week)
    assert shown == {"Week starting": week["factor"], "Group": week["layer"], "Tonnes": f"{week['value']:,.0f}"}, shown
    assert week["value"] < 1000 or "," in shown["Tonnes"]
    # Vessels by status per port: the bar's port, status and count; a click filters by its port.
    port = bar(page, "Vessels by status per port")
    shown = tooltip(page, port)
    assert shown == {"Port": port["factor"], "Status": port["layer"], "Vessels": f"{port['value']:,.0f}"}, shown
    code = port["factor"].rsplit("(", 1)[1].rstrip(")")
    change_filter(page, lambda p: p.mouse.click(port["x"], port["y"]))
    expect_text(page, ".row-count", f"({code})")  # "Port Santos (BRSSZ)"
    ports = page.locator(".lineups-table .tabulator-row [tabulator-field=port]")
    expect(ports.filter(has_not_text=code)).to_have_count(0)
    # A click on a week's bar keeps that week: once the charts show the port's totals
    # (they follow the rows; a slow machine clicked a week of the charts before).
    until_chart_factors_end_with(page, "Vessels by status per port", f"({code})")
    week = bar(page, "Quantity by commodity group per week (kt, MT rows)")
    change_filter(page, lambda p: p.mouse.click(week["x"], week["y"]))
    monday = dt.date.fromisoformat(week["factor"])
    expect_text(page, ".row-count", f"from {monday}")
    expect_text(page, ".row-count", f"to {monday + dt.timedelta(days=6)}")
