"""The import order of the packages and of the layers inside them (style rules 1 and
11), as the import-linter contracts in pyproject.toml state it: `lint-imports` run
with the suite, so that an import against the order (also one inside a function)
fails the README's test command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_follows_the_contracts_of_pyproject():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
