"""The explorer in real headless Chromium (Debian's `chromium`, driven by Playwright;
never a downloaded browser): log in, change a filter and see the table and charts
change, open a row's provenance, download the CSV, create a share link, see it
listed, revoke it, log out; and lose the session when the key is revoked.

The server is `python -m explorer` over the default demo data set (5,000 records, as
`lineups serve --demo` loads). Timings (first view after login, filter change to
table update) are printed and written to `explorer-timings.json` beside the screenshots
of every view, which go to a temporary folder; `LINEUPS_SCREENSHOTS=docs/screenshots`
writes them (and `docs/explorer-timings.json`) for the docs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from store.db import create_schema, engine_for, make_sessionmaker, transaction

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
REPO = Path(__file__).resolve().parents[2]
#: Screenshots and timings go to docs/ only when asked (`LINEUPS_SCREENSHOTS=docs/screenshots`),
#: so that running the suite does not rewrite tracked files.
_ASKED = os.environ.get("LINEUPS_SCREENSHOTS")
SHOTS = Path(_ASKED) if _ASKED else Path(tempfile.gettempdir()) / "lineups-screenshots"
TIMINGS = (SHOTS.parent / "explorer-timings.json") if _ASKED else SHOTS / "explorer-timings.json"
DEMO_RECORDS = 5000  # what `lineups serve --demo` loads
ANCHOR = dt.date(2026, 11, 23)
SECRET = "browser-test-secret"
VIEWPORT = {"width": 1440, "height": 900}
TIMINGS_SEEN: dict = {}

if not Path(CHROMIUM).exists():
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`python -m explorer` over a SQLite store with the default demo data:
    yields `{"base_url", "api_key", "buyer_id", "sessions"}`."""
    from store.demo import load_demo
    from store.settings import Settings

    folder = tmp_path_factory.mktemp("explorer")
    settings = Settings(db_url=f"sqlite:///{folder / 'lineups.db'}", secrets=(SECRET,))
    engine = engine_for(settings)
    create_schema(engine)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        demo = load_demo(session, DEMO_RECORDS, seed=7, anchor=ANCHOR)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "LINEUPS_SECRET": SECRET}
    log = open(folder / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "explorer", "--db", settings.db_url, "--port", str(port)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base_url}/explorer/login", timeout=2).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or still starting up
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the explorer did not start:\n{(folder / 'server.log').read_text()}")
            time.sleep(0.2)
        yield {"base_url": base_url, "api_key": demo["api_key"], "buyer_id": demo["buyer_id"], "sessions": sessions}
    finally:
        server.terminate()
        server.wait(10)
        log.close()
        engine.dispose()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, served):
    from playwright.sync_api import expect

    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served["base_url"])
    page = context.new_page()
    page.set_default_timeout(20_000)
    # Expectations wait as long as actions: on a busy 2-core machine a redraw can take seconds.
    expect.set_options(timeout=20_000)
    yield page
    context.close()


def shot(page, name: str, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(400)  # let Bokeh finish painting the canvases
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def sign_in(page, served) -> float:
    """Log in through the form; returns seconds from submitting it to the first
    table rows on screen."""
    page.goto(f"{served['base_url']}/explorer")
    page.wait_for_selector("#api_key")
    page.fill("#api_key", served["api_key"])
    started = time.perf_counter()
    page.click("button[type=submit]")
    page.locator(".lineups-table .tabulator-row").first.wait_for(state="visible")
    return time.perf_counter() - started


def redrawn(page, selector: str, before: bytes, timeout: float = 10.0) -> bool:
    """Whether the element's picture differs from `before` within `timeout` seconds
    (a chart is redrawn a moment after the table, later on a busy machine)."""
    from playwright.sync_api import Error

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if page.locator(selector).screenshot() != before:
                return True
        except Error:  # replaced while Bokeh redraws it: look again
            pass
        page.wait_for_timeout(200)
    return False


def row_count(page) -> str:
    return page.locator(".row-count p").first.inner_text()


def change_filter(page, change) -> float:
    """Apply `change` (a function of the page) and return seconds until the row
    count on screen changed."""
    from playwright.sync_api import expect

    before = row_count(page)
    started = time.perf_counter()
    change(page)
    expect(page.locator(".row-count p").first).not_to_have_text(before)
    return time.perf_counter() - started


def pick_commodity(page, name: str) -> None:
    page.locator(".filter-commodity input").first.click()
    page.keyboard.type(name)
    page.locator(".filter-commodity .choices__item--choice", has_text=name).first.click()
    page.keyboard.press("Escape")


def pick_day(page, name: str, which: str) -> None:
    """Pick the first or last day of the month a date filter's calendar shows."""
    page.locator(f".filter-{name} input:visible").first.click()
    calendar = page.locator(".flatpickr-calendar.open")
    days = calendar.locator(".flatpickr-day:not(.prevMonthDay):not(.nextMonthDay)")
    (days.first if which == "first" else days.last).click()
    page.keyboard.press("Escape")


def test_the_explorer_flow(page, served):
    from playwright.sync_api import expect

    base = served["base_url"]
    page.goto(f"{base}/explorer")
    expect(page).to_have_url(f"{base}/explorer/login?next=%2Fexplorer")
    shot(page, "login", full_page=False)

    started = time.perf_counter()
    cold = sign_in(page, served)
    expect(page.locator(".row-count p").first).to_contain_text("rows · All lineups")
    page.locator(".weekly-chart canvas").first.wait_for()
    page.locator(".status-chart canvas").first.wait_for()
    cold_charts = time.perf_counter() - started
    shot(page, "lineups")
    everything = row_count(page)
    weekly_before = page.locator(".weekly-chart").screenshot()
    status_before = page.locator(".status-chart").screenshot()

    # A filter change: the count, the table and both charts follow.
    port_change = change_filter(page, lambda p: p.locator(".filter-port select").select_option(label="Santos (BRSSZ)"))
    expect(page.locator(".row-count p").first).to_contain_text("Port BRSSZ")
    ports = page.locator(".lineups-table .tabulator-row [tabulator-field=port]")
    expect(ports.first).to_contain_text("BRSSZ")
    assert all(text.endswith("BRSSZ") for text in ports.all_inner_texts())
    assert redrawn(page, ".weekly-chart", weekly_before)
    assert redrawn(page, ".status-chart", status_before)
    commodity_change = change_filter(page, lambda p: pick_commodity(p, "Soybeans"))
    expect(page.locator(".row-count p").first).to_contain_text("commodity Soybeans")
    latest_change = change_filter(page, lambda p: p.locator(".filter-latest input").check())
    merge_change = change_filter(page, lambda p: p.locator(".filter-merge button", has_text="One row per feed").click())
    unmerge_change = change_filter(page, lambda p: p.locator(".filter-merge button", has_text="Merge all feeds").click())
    shot(page, "lineups-filtered")

    # Provenance of a row several feeds reported.
    merged_row = page.locator(".lineups-table .tabulator-row", has=page.locator("[tabulator-field=source_name]", has_text=";")).first
    vessel = merged_row.locator("[tabulator-field=vessel_name]").inner_text()
    merged_row.click()
    detail = page.locator(".row-detail")
    expect(detail).to_contain_text("Merged from")
    expect(detail).to_contain_text("ETA revisions")
    expect(page.locator(".provenance-table .tabulator-row").first).to_be_visible()
    expect(page.locator(".eta-table .tabulator-row")).to_have_count(len(merged_row.locator("[tabulator-field=source_name]").inner_text().split(";")))
    assert vessel
    detail.scroll_into_view_if_needed()
    shot(page, "row-detail")

    # The download is the whole filtered result.
    with page.expect_download() as download:
        page.locator(".bk-btn", has_text="Download CSV").first.click()
    text = Path(download.value.path()).read_bytes().decode("utf-8")
    count = int(row_count(page).split(" ", 1)[0].replace(",", "").replace("**", ""))
    assert text.startswith("\ufeffid,source_id,source_name,")
    assert len(text.split("\r\n")) - 2 == count

    # An invalid combination shows the API's message.
    pick_day(page, "date_from", "last")
    pick_day(page, "date_to", "first")
    expect(page.locator(".query-error")).to_contain_text("Invalid parameter 'from': 'from' must not be after 'to'")
    pick_day(page, "date_to", "last")
    expect(page.locator(".query-error")).to_be_hidden()

    # A share link of the current filters: created, copied, listed, revoked.
    page.get_by_text("Share links", exact=True).click()
    expect(page.locator(".current-filters")).to_contain_text("Port BRSSZ · commodity Soybeans · from ")
    page.locator(".create-link button").click()
    url_box = page.locator(".link-url input").first
    expect(page.locator(".share-notice")).to_contain_text("Link created")
    url = url_box.input_value()
    assert url.startswith(f"{base}/v1/share/")
    assert page.locator(".link-formula input").first.input_value() == f'=IMPORTDATA("{url}")'
    page.locator(".copy-button button").first.click()
    assert page.evaluate("navigator.clipboard.readText()") == url
    listed = page.locator(".links-table .tabulator-row", has_text="Port BRSSZ · commodity Soybeans · from ")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text("never")
    shot(page, "share-links")
    listed.get_by_text("Revoke", exact=True).click()
    expect(page.locator(".revoke-confirmation")).to_contain_text("Revoke this link?")
    shot(page, "revoke-confirmation")
    page.locator(".confirm-revoke button").click()
    expect(page.locator(".share-notice")).to_contain_text("Link revoked")
    expect(listed).to_have_count(0)
    _assert_revoked(served, url)

    # The feeds screen.
    page.get_by_text("Feeds", exact=True).click()
    cards = page.locator(".feed-card")
    expect(cards).to_have_count(5)
    expect(page.locator(".feed-card", has_text="Iron Ore Watch")).to_contain_text("trial")
    page.locator(".feed-card canvas").first.wait_for()
    shot(page, "feeds")

    # Log out.
    page.locator("a.logout").click()
    expect(page).to_have_url(f"{base}/explorer/login?logged_out=1")
    expect(page.locator(".notice")).to_contain_text("You are signed out.")
    page.goto(f"{base}/explorer/")
    expect(page).to_have_url(f"{base}/explorer/login?next=%2Fexplorer%2F")

    started = time.perf_counter()
    warm = sign_in(page, served)
    page.locator(".status-chart canvas").first.wait_for()
    warm_charts = time.perf_counter() - started
    filter_changes = [port_change, commodity_change, latest_change, merge_change, unmerge_change]
    TIMINGS_SEEN.update(
        {
            "first_view_after_login_s": {"cold": round(cold, 3), "warm": round(warm, 3)},
            "charts_drawn_after_login_s": {"cold": round(cold_charts, 3), "warm": round(warm_charts, 3)},
            "filter_change_to_table_update_s": {
                "port": round(port_change, 3),
                "commodity": round(commodity_change, 3),
                "latest": round(latest_change, 3),
                "merge_by_source": round(merge_change, 3),
                "merge_all": round(unmerge_change, 3),
                "median": round(statistics.median(filter_changes), 3),
                "max": round(max(filter_changes), 3),
            },
            "rows_before_filters": int(everything.split(" ", 1)[0].replace(",", "")),
        }
    )
    _write_timings()


def test_a_revoked_key_sends_the_browser_to_the_login_page(page, served):
    from playwright.sync_api import expect

    from store import accounts

    sign_in(page, served)
    with transaction(served["sessions"]) as session:
        key, row = accounts.create_key(session, accounts.find_buyer(session, served["buyer_id"]))
    # Sign in again with a key of its own, so the other test's key stays valid.
    page.goto(f"{served['base_url']}/explorer/logout")
    page.fill("#api_key", key)
    page.click("button[type=submit]")
    page.locator(".lineups-table .tabulator-row").first.wait_for()
    with transaction(served["sessions"]) as session:
        accounts.revoke_key(session, session.merge(row))
    page.locator(".filter-port select").select_option(label="Rotterdam (NLRTM)")
    expect(page).to_have_url(f"{served['base_url']}/explorer/login?next=%2Fexplorer%2F", timeout=10_000)
    expect(page.locator(".notice")).to_contain_text("Your session has ended")


def _assert_revoked(served, url: str) -> None:
    from store import links
    from store.errors import Unauthorized

    with transaction(served["sessions"]) as session, pytest.raises(Unauthorized):
        links.open_link(session, url.rsplit("/", 1)[1], (SECRET,))


def _write_timings() -> None:
    from importlib.metadata import version

    payload = {
        "what": "explorer in headless Chromium over the default demo data (python -m explorer, SQLite)",
        "records": DEMO_RECORDS,
        "measured_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "chromium": subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip(),
        "playwright": version("playwright"),
        **TIMINGS_SEEN,
    }
    print(json.dumps(payload, indent=2))
    TIMINGS.write_text(json.dumps(payload, indent=2) + "\n")
