"""The collector paused for a start's catch-up and run again after it; old garbage never frozen."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from zeroscaler.controller.memory import pause_collection, release_free_memory, resume_collection


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    gc.enable() if enabled else gc.disable()


def test_a_paused_collector_leaves_cycles_until_it_is_resumed() -> None:
    pause_collection()
    assert not gc.isenabled()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    for _ in range(2000):  # enough allocations for many automatic collections, none of which run
        _Node()
    assert gone() is not None
    resume_collection()
    assert gc.isenabled()
    assert gone() is None


def test_resuming_a_collector_that_runs_changes_nothing() -> None:
    gc.enable()
    resume_collection()
    assert gc.isenabled()


def test_a_cycle_that_grew_old_before_it_died_is_freed_not_frozen() -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc.collect(1)  # it survives a collection while in use: promoted to the oldest generation
    del a, b
    release_free_memory()
    assert gone() is None
