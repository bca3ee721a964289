"""What a `lineups` command loads (issue 50.6): each command's module imports what the
command needs and the group imports that module only when the command runs, so
`lineups --help` and the commands that only read accounts never import pandas. These
tests check what was imported (sys.modules in a fresh process), never how long it took
(the start-up times are measured in the issue's notes, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from cli.main import COMMANDS, lineups

#: Runs the console script's entry point in a fresh interpreter and reports, on the
#: last line of stderr, whether pandas (or the server's Tornado) was imported.
PROBE = (
    "import json, sys\n"
    "from cli.main import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(json.dumps({m: m in sys.modules for m in ('pandas', 'tornado.web')}), file=sys.stderr)\n"
)


def loaded_by(*args: str, db: str | None = None) -> dict[str, bool]:
    """Which of pandas and Tornado a `lineups ARGS` process imported."""
    env_args = [*args, *(["--db", db] if db else [])]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *env_args], capture_output=True, text=True, timeout=120
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_help_imports_no_pandas():
    assert loaded_by("--help") == {"pandas": False, "tornado.web": False}


@pytest.mark.parametrize("command", [["link", "list", "Acme"], ["key", "list", "Acme"], ["feed", "list"]])
def test_listing_commands_import_no_pandas(tmp_path, command):
    db = f"sqlite:///{tmp_path / 'lineups.db'}"
    assert subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "buyer", "add", "Acme",
                           "--db", db], capture_output=True, timeout=120).returncode == 0
    assert loaded_by(*command, db=db) == {"pandas": False, "tornado.web": False}


def test_a_command_that_needs_pandas_still_gets_it(tmp_path):
    """The other side: the lazy loading did not leave a command without its module."""
    db = f"sqlite:///{tmp_path / 'lineups.db'}"
    assert loaded_by("commodity", "unresolved", db=db)["pandas"] is True


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_help_summary_of_each_lazy_command_is_its_own(name):
    """`lineups --help` lists the commands from `COMMANDS` without importing them: each
    summary there must be what the command itself says, and its name the one it runs by."""
    command = lineups.get_command(click.Context(lineups), name)
    assert command.name == name
    assert COMMANDS[name][1] == command.get_short_help_str(limit=1000)


def test_help_lists_every_command():
    result = subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)
