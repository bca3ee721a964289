"""The mixed workload's page pass, this tree against an earlier commit, on one store:
for a change to the read path, the figure that a busy shared machine cannot blur.

    python -m bench compare REV [--records 250000] [--rounds 2]

Builds one bench store with the mixed workload's buyers and views, then alternates a
fresh `lineups serve` of REV (a git worktree, put first on PYTHONPATH) and of this
tree, each asked a different set of `--queries` distinct first pages from 4 clients
(`load.load_pass`, as `mixed`'s load step), on a fresh copy of the store each time.
Prints pages/s, p50 and p99 of each pass with the load average at its start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.figures import stage
from bench.load import load_pass
from bench.stores import add_buyers, build_store, path_of, questions, start_server

REPO = Path(__file__).resolve().parents[1]


def one_pass(dataset, buyers, pristine: Path, folder: Path, source: Path | None, queries: int, seed: int):
    """The `LoadResult` of one pass of a server running the code in `source` (None: this tree)."""
    live = Path(dataset.db_url.removeprefix("sqlite:///"))
    shutil.copyfile(pristine, live)
    for suffix in ("-wal", "-shm"):
        Path(f"{live}{suffix}").unlink(missing_ok=True)
    with start_server(dataset, folder, **({"PYTHONPATH": str(source)} if source else {})) as server:
        asks = questions(buyers, queries, seed)
        return load_pass(server.base_url, [(path_of(params), key) for _, key, params in asks])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench compare", description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the earlier commit to compare with")
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--queries", type=int, default=1_500)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lineups-compare-") as tmp:
        folder = Path(tmp)
        worktree = folder / "earlier"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(worktree), args.rev], check=True)
        try:
            with stage("compare", f"building a store of {args.records:,} records and its buyers' views"):
                dataset = build_store(folder, args.records)
                buyers, _, _ = add_buyers(dataset)
            pristine = folder / "pristine.db"
            shutil.copyfile(dataset.db_url.removeprefix("sqlite:///"), pristine)
            for round_ in range(1, args.rounds + 1):
                for name, source in ((args.rev, worktree), ("this tree", None)):
                    load = os.getloadavg()[0]
                    result = one_pass(dataset, buyers, pristine, folder, source, args.queries, 20 + round_)
                    print(f"round {round_} {name:>12}: {result.rate:7.1f} pages/s  p50 {result.p50_ms:6.1f} ms"
                          f"  p99 {result.p99_ms:7.1f} ms  errors {result.errors}  (load {load:.2f})", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)], check=False)
    return 0
