"""The keyed queue hands a key to one worker at a time; wakes due are asked for urgently."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Literal, TypeVar

import pytest

from zeroscaler.controller.context import Context
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.noting import ActivityNotes
from zeroscaler.controller.queue import KeyedQueue, WakeGate
from zeroscaler.controller.workload import Workload, count_pending_wakes, owes_wake
from zeroscaler.controller.workload_object import trim_workload
from zeroscaler.core.activity import Activity
from zeroscaler.core.annotations import WorkloadStatus
from zeroscaler.runtime.clock import ManualClock

T = TypeVar("T")
KEY = ("Deployment", "ops", "op")
BARE = trim_workload({"metadata": {}, "spec": {"replicas": 0}})  # nothing set


async def taken(waiting: Awaitable[T]) -> T | None:
    """What `waiting` gives within a few milliseconds, or None."""
    try:
        return await asyncio.wait_for(waiting, 0.01)
    except TimeoutError:
        return None


async def test_a_key_added_twice_is_taken_once() -> None:
    queue: KeyedQueue[str] = KeyedQueue()
    for key in ("a", "b", "a"):
        queue.add(key)
    assert [await taken(queue.take()) for _ in range(3)] == ["a", "b", None]


async def test_a_running_key_is_not_handed_out_again_until_released() -> None:
    queue: KeyedQueue[str] = KeyedQueue()
    queue.add("a")
    first = await taken(queue.take())
    queue.add("a")  # asked for while it runs
    queue.add("b")
    second = await taken(queue.take())  # "a" is skipped: it is running
    nothing = await taken(queue.take())
    queue.release("a")  # done: it was asked for meanwhile, so it waits again
    third = await taken(queue.take())
    queue.release("a")
    last = await taken(queue.take())
    assert [first, second, nothing, third, last] == ["a", "b", None, "a", None]


async def test_wakes_due_go_first_and_some_workers_take_only_them() -> None:
    due: set[str] = set()
    queue: KeyedQueue[str] = KeyedQueue(due.__contains__)
    for key in ("a", "b", "c"):
        queue.add(key)
    due.add("c")
    queue.add("c")  # became urgent while waiting: moves up
    taken_ = [await taken(queue.take(urgent_only=True)), await taken(queue.take())]
    taken_.append(await taken(queue.take(urgent_only=True)))  # only "b" is left: not urgent
    taken_ += [await taken(queue.take()), await taken(queue.take())]
    assert taken_ == ["c", "a", None, "b", None]


def test_a_wake_is_due_until_done() -> None:
    gate: WakeGate[str] = WakeGate()
    gate.due("a")
    gate.due("b")
    gate.done("a")
    assert (gate.is_due("a"), gate.is_due("b")) == (False, True)
    gate.done("b")
    assert not gate.is_due("b")


NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("state", "running", "due", "enqueued", "activity_at"),
    [
        ("asleep", False, [KEY], [KEY], 7.5),  # a wake is due, from the clock's loop time
        ("awake", True, [], [KEY], 7.5),  # a running reconcile looks again
        ("awake", False, [], [], None),  # the idle clock restarts; its timer stands
    ],
)
def test_activity_restarts_the_clock_and_makes_a_wake_due(
    state: str, running: bool, due: list[object], enqueued: list[object], activity_at: float | None
) -> None:
    queued: list[object] = []
    woken: list[object] = []
    context = Context(ManualClock(NOW, 7.5), lambda: True, queued.append, lambda c: c.close())
    notes = ActivityNotes(context, Metrics(lambda: True), lambda _: running, woken.append)
    w = Workload(KEY, BARE, last_activity=datetime(2026, 1, 1, tzinfo=UTC))
    w.status = WorkloadStatus(state="asleep" if state == "asleep" else "awake")
    notes.note(
        w.key,
        w.idle,
        w.shown_status.state == "asleep",
        Activity("ConfigMap", "ops", "c", "ConfigMap ops/c created"),
        NOW,
    )
    assert (w.idle.last_activity, w.idle.activity_reason) == (NOW, "ConfigMap ops/c created")
    assert (woken, queued, w.idle.activity_at) == (due, enqueued, activity_at)


def test_a_pending_wake_keeps_the_reason_of_the_change_that_woke_it() -> None:
    context = Context(ManualClock(NOW, 7.5), lambda: True, lambda _: None, lambda c: c.close())
    notes = ActivityNotes(context, Metrics(lambda: True), lambda _: False, lambda _: None)
    w = Workload(KEY, BARE, last_activity=datetime(2026, 1, 1, tzinfo=UTC))
    w.status = WorkloadStatus(state="asleep")
    for name in ("first", "second"):
        notes.note(
            w.key,
            w.idle,
            w.shown_status.state == "asleep",
            Activity("Backup", "ops", name, f"Backup ops/{name} created"),
            NOW,
        )
    assert (w.idle.last_activity, w.idle.activity_reason) == (NOW, "Backup ops/first created")
    w.status = WorkloadStatus(state="awake")
    notes.note(
        w.key,
        w.idle,
        w.shown_status.state == "asleep",
        Activity("Backup", "ops", "third", "Backup ops/third created"),
        NOW,
    )
    assert w.idle.activity_reason == "Backup ops/third created"


@pytest.mark.parametrize(
    ("state", "activity_at", "managed", "deleted", "owed"),
    [
        ("asleep", 7.5, True, False, True),  # a wake not answered yet: it stays urgent
        ("asleep", None, True, False, False),  # nothing happened
        ("awake", 7.5, True, False, False),  # awake already (activity while a write was out)
        ("asleep", 7.5, False, False, False),  # not managed: nothing to wake
        ("asleep", 7.5, True, True, False),  # deleted
    ],
)
def test_a_wake_is_owed_while_asleep_with_activity_unanswered(
    state: Literal["awake", "asleep"],
    activity_at: float | None,
    managed: bool,
    deleted: bool,
    owed: bool,
) -> None:
    w = Workload(KEY, BARE, last_activity=NOW)
    w.status = WorkloadStatus(state=state)
    w.idle.activity_at, w.managed, w.deleted = activity_at, managed, deleted
    assert owes_wake(w) is owed
    assert count_pending_wakes([w, w]) == (2 if owed else 0)


async def test_the_queue_says_when_nothing_waits_and_nothing_runs() -> None:
    queue: KeyedQueue[str] = KeyedQueue()
    await queue.until_idle()  # nothing ever added
    queue.add("a")
    queue.add("b")
    idle = asyncio.ensure_future(queue.until_idle())
    a = await queue.take()
    queue.release(a)
    await asyncio.sleep(0)
    assert not idle.done()  # b still waits
    b = await queue.take()
    queue.add(b)  # asked for again while it runs
    queue.release(b)
    await asyncio.sleep(0)
    assert not idle.done()
    queue.release(await queue.take())
    await idle
    assert queue.idle
