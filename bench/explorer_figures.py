"""The explorer's speed in a real browser (issue 6): the first view after login and
a filter change, on the default demo data (5,000 records).

The instrument is the browser test itself (`tests/explorer/test_browser.py::
test_the_explorer_flow`, headless Debian Chromium driven by Playwright): each run
starts a fresh `python -m explorer` over a store as `lineups serve --demo` leaves it
(the demo buyer's views built), so every run's first sign-in meets a process that
has just started and an empty browser cache ("cold"). The test writes its timings to
`explorer-timings.json` beside its screenshots; this module runs it `runs` times into
a temporary folder and reports the medians.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from figures import Figure, Target, missing

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/explorer/test_browser.py::test_the_explorer_flow"
CHROMIUM = Path("/usr/bin/chromium")


def explorer_figures(folder: Path, runs: int) -> list[Figure]:
    """First view (cold and warm) and filter-change times of `runs` browser runs."""
    labels = {
        "explorer.first_view": ("first view after login, cold (first sign-in to a server just started, empty browser cache)", Target("<=", 2.0)),
        "explorer.first_view_warm": ("first view after login, warm (a later sign-in)", None),
        "explorer.charts": ("both charts drawn after login, cold", None),
        "explorer.filter_median": ("filter change to table updated: median of 5 changes", Target("<=", 1.0)),
        "explorer.filter_max": ("filter change to table updated: slowest of 5 changes", Target("<=", 1.0)),
    }
    if not CHROMIUM.exists():
        why = f"{CHROMIUM} is missing (apt-get install chromium)"
        return [missing(id, "Explorer", label, "s", why, target) for id, (label, target) in labels.items()]
    timings, failures = [], []
    for number in range(runs):
        try:
            timings.append(_run_once(folder / f"explorer-{number}"))
        except RuntimeError as error:  # a failed browser run is reported, not fatal to the bench
            print(error, file=sys.stderr, flush=True)
            failures.append(number)
    if not timings:
        why = f"the browser test failed in all {runs} runs (see the bench's log)"
        return [missing(id, "Explorer", label, "s", why, target) for id, (label, target) in labels.items()]
    values = {
        "explorer.first_view": [t["first_view_after_login_s"]["cold"] for t in timings],
        "explorer.first_view_warm": [t["first_view_after_login_s"]["warm"] for t in timings],
        "explorer.charts": [t["charts_drawn_after_login_s"]["cold"] for t in timings],
        "explorer.filter_median": [t["filter_change_to_table_update_s"]["median"] for t in timings],
        "explorer.filter_max": [t["filter_change_to_table_update_s"]["max"] for t in timings],
    }
    first = timings[0]
    note = (f"{len(timings)} runs of `{TEST}` in headless {first['chromium'].split(' built')[0]} "
            f"(Playwright {first['playwright']}), {first['records']:,} demo records, "
            f"{first['rows_before_filters']:,} merged rows; filters changed: port, commodity, latest, merge mode twice"
            + (f"; {len(failures)} of {runs} runs failed and are not counted" if failures else ""))
    return [
        Figure(id, "Explorer", label, "s", values[id], target, None, note if id == "explorer.first_view" else "")
        for id, (label, target) in labels.items()
    ]


def _run_once(folder: Path) -> dict:
    shots = folder / "screenshots"
    env = {**os.environ, "LINEUPS_SCREENSHOTS": str(shots)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the explorer browser run failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return json.loads((folder / "explorer-timings.json").read_text())
