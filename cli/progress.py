"""Progress of a long command on the operator's terminal."""

from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(total: int, label: str):
    """A tqdm bar on a terminal, nothing otherwise (so --json output stays clean)."""
    return tqdm(total=total, desc=label, unit="rows", disable=not sys.stderr.isatty(), file=sys.stderr)
