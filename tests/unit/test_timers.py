"""The one timer heap: latest schedule wins, cancel works, order is by deadline."""

from __future__ import annotations

import asyncio

from zeroscaler.controller.timers import TimerHeap


async def _run_heap(schedule: list[tuple[str, float]], cancel: list[str]) -> list[str]:
    fired: list[str] = []
    done = asyncio.Event()

    def fire(key: str) -> None:
        fired.append(key)
        done.set()

    heap: TimerHeap[str] = TimerHeap(fire)
    task = asyncio.create_task(heap.run())
    loop = asyncio.get_running_loop()
    start = loop.time()
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
