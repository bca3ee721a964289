"""The objects a server process holds for its whole life, settled once they are made
(`settle_objects`): `lineups serve` settles the API's, the explorer's mount
(`cli.explorer_mount`) the explorer's."""

from __future__ import annotations

import gc


def settle_objects(collect: bool = True) -> None:
    """Take every object this process holds now (modules, the app; ~106,000 with
    the API's modules, ~225,000 once the explorer's are in) out of the cyclic
    garbage collector's full collections (`gc.freeze`, after a collection when
    `collect`): they live as long as the process, and a full collection walked them
    all, holding the interpreter lock, every time one came due under load (50 ms with
    the API's objects, 116-120 ms with the explorer's on this 2-core machine, up to
    170 ms during a load pass): every request in flight waited that long. Later
    collections walk only the objects made since. Before the fork, frozen objects
    are also pages the workers share (Python's documentation of `gc.freeze`)."""
    if collect:
        gc.collect()
    gc.freeze()
