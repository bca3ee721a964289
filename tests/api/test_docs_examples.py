"""The documentation's examples, as a newcomer pastes them (issue 50): every `/v1/...`
path that README.md and docs/*.md name is a route of the API (its OpenAPI document),
and the examples of README.md and docs/api.md, read from the Markdown (never copied
here), run against a real `lineups serve` over the demo data set."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from api.app import api_routes
from api.openapi import openapi_json
from tests.production.conftest import LINEUPS, ROOT, Served, store_env
from tests.waiting import until

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: The key and address the examples are written with; the tests put their own in.
DOC_BASE = "http://127.0.0.1:8000"
DOC_KEY = re.compile(r"lk_(?:[0-9a-f]{32}|…)")

#: A `/v1/...` path as the docs write it (not the bare `/v1`, the API's base):
#: segments of path characters, a placeholder
#: in angle brackets (which may hold spaces) or braces, or an ellipsis.
PATH = re.compile(r"/v1(?:/(?:<[^>\n]*>|\{[^}\n]*\}|[\w.%$:…-]+))+")
#: Mentions that name no route on purpose: reliability.md's example of a key put in
#: an arbitrary path (which the logs redact).
NOT_ROUTES = {"/v1/<key>"}


def route_patterns() -> list[re.Pattern]:
    """A pattern for each path of the OpenAPI document (a parameter is one segment; a
    share token may end in `.csv`, docs/share-links.md) and for each route the API
    serves outside it (the explorer's download tickets, `/v1/download/{ticket}`)."""
    paths = json.loads(openapi_json("http://127.0.0.1"))["paths"]
    documented = [re.compile("^" + re.sub(r"\\\{[^}]*\\\}", r"[^/]+", re.escape(path)) + "$") for path in paths]
    return documented + [re.compile(f"^{route}$") for route, *_ in api_routes(deps=None)]


def doc_paths() -> list[tuple[str, int, str]]:
    """(file, line, path) for every `/v1/...` path in the docs."""
    found = []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            for match in PATH.finditer(line):
                found.append((doc.relative_to(ROOT).as_posix(), number, match.group(0).rstrip(".:")))
    return found


def names_a_route(path: str, routes: list[re.Pattern]) -> bool:
    """True when `path` is a route, or a route named without its last parameter (the
    prose's `/v1/schema` for `/v1/schema/{sourceId}`)."""
    path = path.removesuffix(".csv")
    return any(route.match(path) or route.match(path + "/x") for route in routes)


def test_every_path_the_docs_name_is_a_route_of_the_api():
    routes = route_patterns()
    paths = doc_paths()
    assert len(paths) > 50  # the docs were read
    wrong = [found for found in paths if found[2] not in NOT_ROUTES and not names_a_route(found[2], routes)]
    assert wrong == [], wrong


def code_blocks(doc: Path, language: str) -> list[str]:
    """The fenced code blocks of `language` in a Markdown file."""
    return re.findall(rf"^```{language}\n(.*?)^```$", doc.read_text(encoding="utf-8"), flags=re.S | re.M)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict:
    """A SQLite store with the demo data set: `lineups demo`'s answer, its `env`, and
    `key()` for a fresh key of the demo buyer (the rate limit counts per key)."""
    folder = tmp_path_factory.mktemp("docs-demo")
    env = store_env(f"sqlite:///{folder / 'lineups.db'}")
    done = subprocess.run([*LINEUPS, "demo", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    def key() -> str:
        made = subprocess.run([*LINEUPS, "key", "create", "Demo Buyer", "--json"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr[-2000:]
        return json.loads(made.stdout)["key"]

    return {**json.loads(done.stdout), "env": env, "folder": folder, "key": key}


@pytest.fixture
def serve(demo, tmp_path):
    """Start `lineups serve` over the demo store: `serve(**env)`; stopped afterwards."""
    started: list[Served] = []

    def start(**extra: str) -> Served:
        server = Served({**demo["env"], **extra}, (), tmp_path / f"serve-{len(started)}.log", 1)
        started.append(server)
        server.wait_until_serving()
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.stop()


def test_the_api_pages_curl_examples_run_as_pasted(demo, serve, tmp_path):
    """docs/api.md's "Try it" commands, with only the key and address changed: every
    id, cursor and link they use comes from the running demo, so each request
    succeeds (curl --fail-with-body) and the files they save are CSV."""
    server = serve()
    (block,) = [b for b in code_blocks(ROOT / "docs" / "api.md", "sh") if "curl" in b]
    script = DOC_KEY.sub(demo["key"](), block).replace(DOC_BASE, server.base_url)
    env = {**demo["env"], "LINEUPS_BASE_URL": server.base_url,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    preamble = 'set -euo pipefail\ncurl() { command curl --fail-with-body -sS "$@"; }\n'
    done = subprocess.run(["bash", "-c", preamble + script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert '"provenance"' in done.stdout or '"records"' in done.stdout, done.stdout[-3000:]
    for saved in ("lineups.csv", "soybeans.csv"):
        text = (tmp_path / saved).read_bytes().decode("utf-8")
        assert text.startswith("\ufeffid,source_id,source_name,"), text[:200]


#: Requests a key may make a minute on the server the Python examples run against: so
#: few that their loops meet the 429 the real limit (100) gives a long walk.
LOW_RATE_LIMIT = 2
#: What each Python example prints after it ran, for the test to compare.
EXAMPLES = {
    "README.md": ('import json; print(json.dumps({"rows": sorted(lineups["id"])}))'),
    "docs/api.md": ('import json; print(json.dumps({"rows": sorted(soy["id"]), "sheet": len(sheet), '
                    '"columns": list(sheet.columns)[:2]}))'),
}


def spend(server: Served, key: str) -> None:
    """Use up `key`'s requests for the minute: its next request gets a 429."""
    import requests

    for _ in range(LOW_RATE_LIMIT + 1):
        answer = requests.get(f"{server.base_url}/v1/sources", headers={"X-API-Key": key}, timeout=60)
    assert answer.status_code == 429 and 1 <= int(answer.headers["Retry-After"]) <= 60


def rate_limited(server: Served) -> int:
    """How many requests the server has answered 429."""
    return sum(status == 429 for _, _, status in server.served_by().values())


@pytest.mark.slow
def test_the_python_examples_wait_out_the_rate_limit(demo, serve, tmp_path):
    """Issue 50.2: the pandas loops of README.md and docs/api.md, read from the
    Markdown with only the key and address changed, start with their key's minute
    used up and must wait as the 429's Retry-After says; they end with every row of
    their query (what one page to an unspent key gives: the query fits in one)."""
    import requests

    server = serve(LINEUPS_RATE_LIMIT=str(LOW_RATE_LIMIT))
    # Every Python block of each page (README.md: the client's, then requests alone).
    examples = [(doc, n, code) for doc in EXAMPLES for n, code in enumerate(code_blocks(ROOT / doc, "python"))]
    assert len(examples) >= len(EXAMPLES)
    keys = {(doc, n): demo["key"]() for doc, n, _ in examples}
    for key in keys.values():
        spend(server, key)
    assert until(lambda: rate_limited(server) == len(examples))  # the access log trails a moment
    running = {}
    for doc, n, code in examples:
        script = DOC_KEY.sub(keys[doc, n], code).replace(DOC_BASE, server.base_url) + "\n" + EXAMPLES[doc] + "\n"
        folder = tmp_path / f"{doc.replace('/', '-')}-{n}"
        folder.mkdir()
        running[doc, n] = subprocess.Popen([sys.executable, "-c", script], cwd=folder, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
    printed = {}
    for (doc, n), process in running.items():
        out, err = process.communicate(timeout=900)
        assert process.returncode == 0, (doc, n, err[-3000:])
        printed.setdefault(doc, []).append(json.loads(out.strip().splitlines()[-1]))
    assert until(lambda: rate_limited(server) >= 2 * len(examples))  # each example met a 429 and waited

    def one_page(key: str, **params) -> requests.Response:
        answer = requests.get(f"{server.base_url}/v1/lineups", params=params, headers={"X-API-Key": key}, timeout=60)
        assert answer.status_code == 200, answer.text
        return answer

    key = demo["key"]()
    everything = one_page(key, commodity="Soybeans", country="Brazil", limit=500).json()
    assert everything["next_cursor"] is None and everything["data"]
    assert all(example["rows"] == sorted(row["id"] for row in everything["data"]) for example in printed["README.md"])
    key = demo["key"]()
    latest = one_page(key, commodity="Soybeans", country="Brazil", latest="true", limit=500).json()
    (api_md,) = printed["docs/api.md"]
    assert api_md["rows"] == sorted(row["id"] for row in latest["data"])
    csv_page = one_page(key, format="csv", port="BRSSZ", limit=100).content.decode("utf-8-sig").split("\r\n")
    assert api_md["sheet"] == len([line for line in csv_page[1:] if line]) == 100
    assert api_md["columns"] == ["id", "source_id"]
