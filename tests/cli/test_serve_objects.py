"""A server process keeps its long-lived objects out of the garbage collector's full
collections (`cli.process_objects.settle_objects`): a full collection holds the interpreter lock
while it walks every tracked object, and with the explorer loaded that was 116-170 ms
that every request in flight waited (docs/architecture.md, "What a server process
keeps"). Garbage is still freed, before the freeze and after it."""

from __future__ import annotations

import gc
import weakref

import pytest

from cli.process_objects import settle_objects


class Node:
    other: "Node"


def garbage_cycle(freed: list[str], name: str) -> None:
    """Two objects that only reach each other: freed by a collection, not by counts."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    weakref.finalize(a, freed.append, name)


@pytest.fixture
def collector():
    """No automatic collection during the test (the counts below are the test's own);
    the process's collector as it was afterwards (its frozen objects are given back by
    `tests/conftest.py::collector_unfrozen`, as after every test)."""
    was_enabled = gc.isenabled()
    gc.disable()
    yield
    if was_enabled:
        gc.enable()


def test_live_objects_leave_full_collections_and_garbage_is_freed_before_and_after(collector):
    freed: list[str] = []
    before = gc.get_freeze_count()
    garbage_cycle(freed, "made before")
    alive = [Node() for _ in range(1_000)]
    settle_objects()
    assert freed == ["made before"]  # collected first: never frozen for good
    assert gc.get_freeze_count() >= before + len(alive)  # what lives on is not walked again
    garbage_cycle(freed, "made after")
    gc.collect()
    assert freed == ["made before", "made after"]
    del alive


def test_settling_without_a_collection_only_freezes(collector):
    """The explorer's mount freezes what its build (which collected in its own
    thread) made, without a second full collection on the event loop."""
    freed: list[str] = []
    garbage_cycle(freed, "left")
    settle_objects(collect=False)
    gc.collect()
    assert freed == []  # frozen as it was: why the build collects before the mount
    gc.unfreeze()
    gc.collect()
    assert freed == ["left"]
