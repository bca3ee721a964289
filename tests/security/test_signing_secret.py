"""The signing secret (store/settings.py; issue 49 item 8): a secret shorter than 32
characters is refused with a clear message, from `LINEUPS_SECRET` and from the file
kept beside an embedded store; that file is written whole or not at all.

Before, an empty `.secret` (what a crash between creating the file and writing it
left) was used as the secret: a cookie signed with '' opened the explorer.
"""

from __future__ import annotations

import concurrent.futures
import stat

import pytest

from store.settings import MIN_SECRET_CHARS, Settings, SettingsError
from tests.production.conftest import lineups, store_env


def serve_refusal(env: dict[str, str]) -> str:
    """What `lineups serve` says when it refuses to start (it must)."""
    refused = lineups({**env}, "serve", "--port", "0")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    return refused.stderr


@pytest.mark.parametrize("content", ["", "\n", "short-secret\n"])
def test_a_secret_file_that_holds_less_than_a_secret_is_refused(tmp_path, content):
    store = tmp_path / "lineups.db"
    (tmp_path / "lineups.db.secret").write_text(content)
    with pytest.raises(SettingsError, match=f"shorter than {MIN_SECRET_CHARS} characters"):
        Settings(db_url=f"sqlite:///{store}").signing_secrets()
    env = store_env(f"sqlite:///{store}")
    del env["LINEUPS_SECRET"]
    message = serve_refusal(env)
    assert "lineups.db.secret is shorter than 32 characters" in message and "Delete the file" in message


@pytest.mark.parametrize("secret", ["short", "x" * (MIN_SECRET_CHARS - 1), f"{'n' * 40},old"])
def test_a_short_secret_in_the_environment_is_refused(tmp_path, secret):
    env = store_env(f"sqlite:///{tmp_path / 'lineups.db'}", LINEUPS_SECRET=secret)
    assert "A signing secret in LINEUPS_SECRET is shorter than 32 characters" in serve_refusal(env)
    assert Settings.load(env={"LINEUPS_SECRET": "y" * MIN_SECRET_CHARS}).signing_secrets() == ("y" * MIN_SECRET_CHARS,)


def test_the_secret_file_is_made_whole_once_for_every_process(tmp_path):
    """Processes starting together over a new store all sign with the one secret
    written (mode 0600), and leave no partial file behind."""
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'lineups.db'}")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        made = set(pool.map(lambda _: settings.signing_secrets(), range(32)))
    secret_file = tmp_path / "lineups.db.secret"
    assert made == {(secret_file.read_text().strip(),)} and len(secret_file.read_text().strip()) >= 64
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lineups.db.secret"]
