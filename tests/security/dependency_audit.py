"""Known vulnerabilities of the service's runtime dependencies, read from PyPI.

Not a test (it needs the network, and the suite must not): run it by hand,

    .venv/bin/python tests/security/dependency_audit.py

`pip-audit` is the tool of choice and is tried first. Where PyPI answers only its
project endpoint (`/pypi/NAME/json`) and not the per-version one that pip-audit asks,
pip-audit skips every package and still says "No known vulnerabilities found"; this
script then reads the project endpoint for each direct runtime dependency of
pyproject.toml: the `vulnerabilities` it lists are those of the latest release
(PyPI's own advisory data, the PyPA database that pip-audit also reads), which apply
when the installed version is that release. A dependency older than the latest is
reported as not audited. Prints one line per dependency; exits 1 when one has a known
vulnerability or could not be audited.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import requests
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def pip_audit() -> dict | None:
    """pip-audit's JSON report of the environment, or None when it could not run."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip_audit", "--format", "json", "--progress-spinner", "off"],
                              capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return None


def runtime_dependencies() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [re.split(r"[\s<>=!~\[;]", spec, maxsplit=1)[0] for spec in project["dependencies"]]


def audit(name: str) -> tuple[str, str, list[str]]:
    """(installed version, verdict, advisory ids) of one distribution."""
    installed = metadata.version(name)
    answer = requests.get(f"https://pypi.org/pypi/{name}/json", timeout=30)
    answer.raise_for_status()
    data = answer.json()
    latest = data["info"]["version"]
    ids = [v.get("id") for v in data.get("vulnerabilities") or []]
    if Version(installed) != Version(latest):
        return installed, f"not audited (latest is {latest})", ids
    return installed, "vulnerable" if ids else "no known vulnerability", ids


def main() -> int:
    report = pip_audit()
    if report is not None:
        deps = report.get("dependencies", [])
        audited = [d for d in deps if "skip_reason" not in d]
        vulnerable = [d for d in audited if d.get("vulns")]
        print(f"pip-audit: {len(deps)} distributions, {len(audited)} audited, {len(vulnerable)} with known vulnerabilities")
        for dep in vulnerable:
            print(f"  {dep['name']} {dep['version']}: {', '.join(v['id'] for v in dep['vulns'])}")
        if audited and len(audited) == len([d for d in deps if d["name"] != "lineups"]):
            return 1 if vulnerable else 0
        print("pip-audit could not audit everything; reading PyPI's project endpoint for the runtime dependencies")
    failures = 0
    for name in runtime_dependencies():
        installed, verdict, ids = audit(name)
        failures += verdict != "no known vulnerability"
        print(f"{name} {installed}: {verdict}{' ' + ', '.join(ids) if ids else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
