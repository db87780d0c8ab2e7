"""The one timer heap: latest schedule wins, cancel works, order is by deadline, and deadlines are
read on the clock it is given."""

from __future__ import annotations

import asyncio

from zeroscaler.controller.timers import TimerHeap
from zeroscaler.runtime.clock import LoopClock, ManualClock


async def _run_heap(schedule: list[tuple[str, float]], cancel: list[str]) -> list[str]:
    fired: list[str] = []
    done = asyncio.Event()

    def fire(key: str) -> None:
        fired.append(key)
        done.set()

    clock = LoopClock()
    heap: TimerHeap[str] = TimerHeap(fire, clock)
    task = asyncio.create_task(heap.run())
    start = clock.monotonic()
    for key, delay in schedule:
        heap.schedule(key, start + delay)
    for key in cancel:
        heap.cancel(key)
    while len(heap):
        done.clear()
        await asyncio.wait_for(done.wait(), timeout=2)
    task.cancel()
    return fired


async def test_fires_in_deadline_order_and_rescheduling_replaces() -> None:
    fired = await _run_heap([("a", 0.05), ("b", 0.01), ("a", 0.02), ("c", 0.03)], cancel=["c"])
    assert fired == ["b", "a"]


def test_a_deadline_fires_when_the_clock_it_is_given_reaches_it() -> None:
    clock = ManualClock(monotonic=100.0)
    fired: list[str] = []
    heap: TimerHeap[str] = TimerHeap(fired.append, clock)
    heap.schedule("later", 105.0)
    heap.schedule("sooner", 101.0)
    assert (heap.fire_due(), fired) == (1.0, [])
    clock.advance(1)
    assert (heap.fire_due(), fired) == (4.0, ["sooner"])
    clock.advance(3.5)
    assert (heap.fire_due(), fired) == (0.5, ["sooner"])
    clock.advance(0.5)
    assert (heap.fire_due(), fired) == (None, ["sooner", "later"])


async def test_the_running_heap_judges_what_is_due_on_its_clock_not_the_loops() -> None:
    """A clock behind the loop's time: a deadline a second ahead on it is not due yet, though
    the loop's time is long past it."""
    clock = ManualClock(monotonic=asyncio.get_running_loop().time() - 3600)
    fired: list[str] = []
    now_due = asyncio.Event()

    def fire(key: str) -> None:
        fired.append(key)
        now_due.set()

    heap: TimerHeap[str] = TimerHeap(fire, clock)
    heap.schedule("in a second", clock.monotonic() + 1)
    heap.schedule("now", clock.monotonic())
    task = asyncio.create_task(heap.run())
    await asyncio.wait_for(now_due.wait(), timeout=2)
    task.cancel()
    assert fired == ["now"]
    assert len(heap) == 1
