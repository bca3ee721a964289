"""`python -m bench WORKLOAD [ARGS]`: run one workload (its `main(argv)`)."""

from __future__ import annotations

import importlib
import sys

#: Workload name → its module under bench/ (each has `main(argv) -> int`).
WORKLOADS = {
    "full": "full",  # the whole bench on one store (issue 8)
    "mixed": "mixed",  # the headline: many buyers, distinct questions, data changing (issue 15)
    "scaling": "scaling",  # PostgreSQL, one server process against two
    "ingest": "ingest",  # a large feed file (C11)
    "merge": "merge",  # the cold merge, what building a view costs
    "explorer": "explorer",  # the explorer in a browser at store size (issue 17)
    "duplicates": "duplicates",  # likely duplicates by cause on the demo data (issue 19)
    "soak": "soak",  # sustained load, every response checked (issue 9)
    "write-lock": "write_lock",  # requests while a writer holds SQLite's lock
    "stalled-exports": "stalled_exports",  # share-link clients that stop reading
    "sync": "sync",  # a caught-up buyer's sync through the change feed against a full download (issue 46)
    "compare": "compare",  # the mixed pages of this tree against an earlier commit
    "operator": "operator_workload",  # the operator's commands: subscriptions, daily update, re-send (issue 47)
    "report": "report",  # docs/benchmarks.md from bench/results/
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in WORKLOADS:
        print("usage: python -m bench WORKLOAD [ARGS]  (python -m bench WORKLOAD --help for its own)\n\nworkloads:")
        print("\n".join(f"  {name}" for name in sorted(WORKLOADS)))
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(f"bench.{WORKLOADS[argv[0]]}")
    return module.main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
