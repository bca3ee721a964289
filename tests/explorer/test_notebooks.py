"""The notebooks run (issue 6, "Notebooks"): `explorer.ipynb` over a demo store, also
as an app under `panel serve`; `api_quickstart.ipynb` against a `lineups serve --demo`
that the test starts. Executed with nbclient in a fresh kernel."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def execute(path: Path, env: dict[str, str], monkeypatch) -> "nbformat.NotebookNode":  # noqa: F821
    """Run every cell of the notebook in a fresh kernel with `env` set; returns it with
    its outputs. Fails on the first cell that raises."""
    import nbformat
    from nbclient import NotebookClient

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}).execute()
    return notebook


def text_of(notebook) -> str:
    """Everything the cells printed or returned, as text."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def wait_for(url: str, process: subprocess.Popen, log: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.RequestException:  # not listening yet, or busy starting
            pass
        if process.poll() is not None:
            break
        time.sleep(0.3)
    pytest.fail(f"{url} did not answer:\n{log.read_text()}")


@pytest.fixture
def demo_env(store_settings, demo) -> dict[str, str]:
    """The environment under which the notebooks reach the demo store."""
    return {"LINEUPS_DB": store_settings.db_url, "LINEUPS_API_KEY": demo["api_key"], "LINEUPS_SECRET": "test-secret-with-at-least-32-characters"}


def test_the_explorer_notebook_builds_the_explorer(demo_env, monkeypatch):
    notebook = execute(NOTEBOOKS / "explorer.ipynb", demo_env, monkeypatch)
    output = text_of(notebook)
    assert "Demo Buyer" in output
    assert "rows: Port " in output
    assert "Tabs(" in output  # the explorer itself was built and shown


def test_panel_serves_the_explorer_notebook(demo_env, tmp_path):
    pytest.importorskip("nbconvert", reason="`panel serve` of a notebook needs nbconvert")
    port = free_port()
    log = tmp_path / "panel.log"
    with open(log, "w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "panel", "serve", str(NOTEBOOKS / "explorer.ipynb"), "--port", str(port),
             "--address", "127.0.0.1", "--allow-websocket-origin", f"127.0.0.1:{port}"],
            cwd=REPO, env={**os.environ, **demo_env}, stdout=sink, stderr=subprocess.STDOUT,
        )
        try:
            wait_for(f"http://127.0.0.1:{port}/favicon.ico", server, log)
            page = requests.get(f"http://127.0.0.1:{port}/explorer", timeout=60)
            assert page.status_code == 200
            assert "<title>Lineups explorer</title>" in page.text
            time.sleep(0.5)
            ran = log.read_text()
            assert "rows: Port " in ran and "Traceback" not in ran  # every cell ran for the session
        finally:
            server.terminate()
            server.wait(10)


def test_the_api_quickstart_pages_through_lineups(tmp_path, monkeypatch):
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "LINEUPS_SECRET": "test-secret-with-at-least-32-characters"}
    env.pop("LINEUPS_DB", None)
    with open(log, "w") as sink:
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("lineups")), "serve", "--demo", "--json", "--port", str(port),
             "--db", f"sqlite:///{tmp_path / 'lineups.db'}"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=sink, text=True,
        )
        try:
            first = server.stdout.readline()
            if not first:
                pytest.fail(f"`lineups serve --demo` printed nothing:\n{log.read_text()}")
            started = json.loads(first)
            wait_for(f"http://127.0.0.1:{port}/healthz", server, log)
            notebook = execute(
                NOTEBOOKS / "api_quickstart.ipynb",
                {"LINEUPS_BASE_URL": started["base_url"], "LINEUPS_API_KEY": started["api_key"]},
                monkeypatch,
            )
        finally:
            server.terminate()
            server.wait(10)
    output = text_of(notebook)
    assert "rows at BRSSZ" in output
    assert "rows held" in output and "the next sync applied 0 changes" in output
    plotted = [o for c in notebook.cells for o in c.get("outputs", []) if "Lineup at BRSSZ" in json.dumps(o)]
    assert plotted, "the lineup plot was not shown"
