"""Every text from a feed, an operator, an address or a buyer is shown as text on
every screen of the explorer (issue 45 items 1–2, issue 49 item 11; style rule 12),
in real headless Chromium.

A feed whose name, type and frequency (operator text) and whose records' every
free-text field and ref (feed text) carry hostile values (HTML, script, event
handlers, `javascript:` URLs, Markdown, entities, very long, right-to-left, emoji)
is added beside the demo's (the browser tests' store, `browsing.served_store`) and subscribed by the demo buyer. The buyer opens the
lineups screen on that feed, every row's detail, an address whose filters carry
hostile values (the count line, the address notice, the Share links tab's current
filters), creates a share link with a hostile name (the created link, the list, the
revoke confirmation) and the Feeds screen. The test fails on any dialog, page
error, console error, element made from a value, or `window.__pwned` being set; and
it checks that the values are on screen as the very text they are.
"""

from __future__ import annotations

import datetime as dt
import json
from urllib.parse import urlencode

import pytest
import requests

from browsing import ANCHOR, Server, browser, new_page, open_tab, served_store, sign_in  # noqa: F401
from store.database.db import transaction
from store.database.schema import Record

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # fixtures

#: Each hostile value names "pwned": whatever of it became markup is found by that word.
HOSTILE = [
    '<img src=x onerror="window.__pwned=1" class=pwned>',
    "<script>window.__pwned=2</script>pwned script",
    '"><svg onload="window.__pwned=3" class=pwned></svg>',
    "[pwned link](javascript:window.__pwned=4)",
    "javascript:window.__pwned=5 pwned",
    "**pwned bold** _pwned em_ `pwned code` $pwned math$",
    "# pwned heading | pwned | table |",
    "&lt;b class=pwned&gt;pwned entity&lt;/b&gt; &amp;",
    "\u202epwned rtl\u202c مرحبا بالعالم שלום",
    "pwned emoji 🚢⚓️👩‍👩‍👧",
    "pwned very long " + "W" * 400,
]
FREE_TEXT = ("port_name", "country_name", "berth_terminal", "vessel_name", "vessel_type", "commodity",
             "shipper", "receiver", "charterer", "operator", "ship_agent")
FEED_NAME = '<img src=x onerror="window.__pwned=6" class=pwned> **pwned feed** [x](javascript:window.__pwned=7)'
FEED_TYPE = "<b class=pwned>pwned type</b>"
FREQUENCY = "<i class=pwned>pwned daily</i> _x_"
#: At most 80 characters: what the Share links tab keeps of a name.
LINK_NAME = '<img src=x onerror="window.__pwned=8" class=pwned>[pwned link name](javascript:)'

#: Elements made from a value (searched through every shadow root, as Bokeh draws in them).
_INJECTED = """() => {
  const found = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      const tag = el.tagName.toLowerCase();
      const made = Array.from(el.attributes || []).filter(
        a => (a.name.startsWith('on') || ['class', 'src', 'style'].includes(a.name)) && /pwned/.test(a.value));
      if (made.length) found.push(tag + ' ' + made.map(a => a.name + '=' + a.value).join(' ').slice(0, 120));
      if (MARKUP.includes(tag) && /pwned/.test(el.textContent)) found.push(tag + ': ' + el.textContent.slice(0, 80));
      if (tag === 'a' && /^\\s*javascript:/i.test(el.getAttribute('href') || '')) found.push('link ' + el.outerHTML.slice(0, 120));
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return {found, pwned: window.__pwned === undefined ? null : window.__pwned};
}""".replace("MARKUP", json.dumps(["strong", "em", "i", "code", "h1", "math", "script", "svg", "img", "a"]))
#: All the text on screen, shadow roots included.
_TEXT = """() => {
  const parts = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) walk(el.shadowRoot);
      for (const node of el.childNodes) if (node.nodeType === 3) parts.push(node.textContent);
    }
  };
  walk(document);
  return parts.join(' ');
}"""


def limits() -> dict[str, int]:
    return {f: Record.__table__.c[f].type.length for f in (*FREE_TEXT, "ref")}


def hostile_rows() -> list[dict]:
    """One record per hostile value, every free-text field (and the ref) carrying it,
    cut to the field's length, calls in the coming days so the first view shows them."""
    size = limits()
    rows = []
    for n, value in enumerate(HOSTILE):
        day = dt.datetime.combine(ANCHOR, dt.time(12), dt.timezone.utc) + dt.timedelta(days=1 + n % 5)
        row = {field: f"{value} {n}"[: size[field]] for field in FREE_TEXT}
        row.update({
            "ref": f"<b class=pwned>r{n}</b>"[: size["ref"]], "port_unlocode": "BRSSZ", "operation": "load",
            "quantity": str(1000 * (n + 1)), "quantity_unit": "MT", "vessel_status": "expected",
            "eta": day.strftime("%Y-%m-%dT%H:%M:%SZ"), "updated_at": day.strftime("%Y-%m-%dT%H:%M:%SZ"),
        })
        rows.append(row)
    # A second version of the first record, so its ETA history has two entries.
    rows.append({**rows[0], "ref": rows[0]["ref"]})
    return rows


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """`lineups serve` over the demo store plus the hostile feed, subscribed (active)
    by the demo buyer, views built: {"base_url", "api_key", "feed_id", "server"}."""
    from store.access import accounts
    from store.intake import feeds, ingest
    from store.views import builds

    db_url, demo, sessions, engine, folder = served_store(tmp_path_factory)
    with transaction(sessions) as session:
        feed = feeds.add_feed(session, FEED_NAME, ["BRSSZ"], frequency=FREQUENCY, feed_type=FEED_TYPE)
        ingest.ingest_file(session, feed, jsonl(folder / "hostile.jsonl", hostile_rows()[:-1]))
        accounts.set_subscription(session, accounts.find_buyer(session, demo["buyer_id"]), feed, "active")
        feed_id = feed.id
    with transaction(sessions) as session:  # the revision: an ETA moved by a day
        first = hostile_rows()[0]
        moved = dt.datetime.strptime(first["eta"], "%Y-%m-%dT%H:%M:%SZ") + dt.timedelta(days=1)
        revised = {**first, "eta": f"{moved:%Y-%m-%dT%H:%M:%SZ}", "updated_at": f"{moved:%Y-%m-%dT%H:%M:%SZ}"}
        ingest.ingest_file(session, feeds.find_feed(session, feed_id), jsonl(folder / "revision.jsonl", [revised]))
    builds.ensure_buyer(sessions, demo["buyer_id"])
    server = Server(db_url, folder)
    try:
        yield {"base_url": server.base_url, "api_key": demo["api_key"], "feed_id": feed_id, "server": server}
    finally:
        server.stop()
        engine.dispose()


def jsonl(path, rows: list[dict]):
    """`rows` written to `path` as a JSON Lines feed file; returns the path."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


class Watch:
    """What the page did that it must not: dialogs, page errors, console errors."""

    def __init__(self, page):
        self.problems: list[str] = []
        page.on("dialog", lambda dialog: (self.problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("console", lambda message: message.type == "error" and self.problems.append(f"console: {message.text} at {message.location}"))
        page.on("response", lambda response: response.status >= 400 and self.problems.append(f"{response.status}: {response.url}"))

    def check(self, page, where: str) -> None:
        page.wait_for_timeout(300)  # an onerror handler runs once the image fails to load
        seen = page.evaluate(_INJECTED)
        assert not self.problems and not seen["found"] and seen["pwned"] is None, (where, self.problems, seen)


def text_on_screen(page) -> str:
    return " ".join(page.evaluate(_TEXT).split())


def shown(value: str) -> str:
    """A value as the screen shows it: its whitespace collapsed."""
    return " ".join(value.split())


def test_hostile_text_is_shown_as_text_on_every_screen(browser, hostile):  # noqa: F811
    from playwright.sync_api import expect

    page = new_page(browser, hostile)
    watch = Watch(page)
    try:
        # Stored: the lineups screen on the hostile feed, every row's detail.
        sign_in(page, hostile, path=f"/explorer?{urlencode({'source': hostile['feed_id'], 'from': ANCHOR.isoformat()})}")
        count = page.locator(".row-count p").first
        expect(count).to_contain_text(f"{len(HOSTILE)} rows")
        expect(count).to_contain_text(shown(FEED_NAME))
        watch.check(page, "lineups screen")
        rows = page.locator(".lineups-table .tabulator-row")
        expect(rows).to_have_count(len(HOSTILE))
        for n in range(len(HOSTILE)):
            rows.nth(n).click()
            expect(page.locator(".row-detail")).to_contain_text("Reported by")
            title = page.locator(".detail-title h3").inner_text()
            watch.check(page, f"detail of row {n}: {title!r}")
            detail = text_on_screen(page)
            vessel = next((v for v in HOSTILE if shown(v)[:40] in title), None)
            assert vessel is not None, (n, title)
            for field in ("vessel_name", "port_name", "commodity"):
                value = f"{vessel} {HOSTILE.index(vessel)}"[: limits()[field]]
                assert shown(value) in " ".join(title.split()), (field, value, title)
            for field in ("shipper", "receiver", "charterer", "operator", "ship_agent", "berth_terminal"):
                value = f"{vessel} {HOSTILE.index(vessel)}"[: limits()[field]]
                assert shown(value) in detail, (field, value)
            assert shown(FEED_NAME) in detail
        text = text_on_screen(page)
        assert "<b class=pwned>r" in text  # the refs, as text

        # Reflected: filters of an address carry hostile values.
        for value in (HOSTILE[0], HOSTILE[3], HOSTILE[5]):
            page.goto(f"{hostile['base_url']}/explorer?{urlencode({'port_name': value, 'port': value, 'latest': value})}")
            expect(page.locator(".row-count p").first).to_contain_text(shown(value))
            expect(page.locator(".address-notice")).to_be_visible()
            watch.check(page, f"address with {value!r}")
            open_tab(page, "Share links")
            expect(page.locator(".current-filters")).to_contain_text(shown(value))
            watch.check(page, f"share links tab with {value!r}")

        # A share link with a hostile name: created, listed, about to be revoked.
        page.goto(f"{hostile['base_url']}/explorer?{urlencode({'port_name': HOSTILE[1]})}")
        expect(page.locator(".row-count p").first).to_contain_text("1 row ·")
        open_tab(page, "Share links")
        page.locator(".link-name input").first.fill(LINK_NAME)
        page.locator(".create-link button").click()
        expect(page.locator(".share-notice")).to_contain_text("Link created")
        expect(page.locator(".created-link")).to_contain_text(shown(LINK_NAME))
        watch.check(page, "share link created")
        listed = page.locator(".links-table .tabulator-row", has_text="pwned link name")
        expect(listed).to_have_count(1)
        listed.locator("[tabulator-field=revoke]").click()
        expect(page.locator(".revoke-confirmation")).to_contain_text(shown(HOSTILE[1]))
        watch.check(page, "revoke confirmation")
        page.locator(".cancel-revoke button").click()

        # Operator text: the Feeds screen.
        open_tab(page, "Feeds")
        card = page.locator(".feed-card", has_text="pwned feed")
        expect(card).to_have_count(1)
        expect(card).to_contain_text(shown(FEED_TYPE))
        expect(card).to_contain_text(shown(FREQUENCY))
        expect(card.locator(".card-title")).to_contain_text(shown(FEED_NAME))
        watch.check(page, "feeds screen")
    finally:
        page.context.close()


def test_explorer_responses_carry_a_content_security_policy_and_nosniff(browser, hostile):  # noqa: F811
    """Every explorer response (the page, Bokeh's static files, the login page, a
    missing path) carries the policy, and the page works under it: the hostile test
    above fails on the console error a blocked script or connection would log."""
    page = new_page(browser, hostile)
    answers = []
    page.on("response", lambda response: answers.append((response.url, response.all_headers())))
    try:
        sign_in(page, hostile)
    finally:
        page.context.close()
    mine = [(url, headers) for url, headers in answers if url.startswith(hostile["base_url"])]
    assert any("/static/" in url for url, _ in mine) and any("/explorer/login" in url for url, _ in mine)
    for url, headers in mine:
        policy = headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy, (url, headers)
        assert headers.get("x-content-type-options") == "nosniff", (url, headers)
    missing = requests.get(f"{hostile['base_url']}/explorer/no-such-page", timeout=30)
    assert missing.headers["X-Content-Type-Options"] == "nosniff" and "frame-ancestors" in missing.headers["Content-Security-Policy"]
