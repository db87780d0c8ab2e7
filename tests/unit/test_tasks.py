"""Shutdown: background work (Event writes, follow-ups) never outlives the API clients."""

from __future__ import annotations

import asyncio
import gc

import pytest

from tests.unit.held_events import HeldRecorder, about
from zeroscaler.controller.context import Context
from zeroscaler.controller.reporting import Reporter
from zeroscaler.controller.tasks import Tasks
from zeroscaler.runtime.clock import LoopClock, ManualClock


async def test_an_event_write_left_at_grace_end_is_cancelled_before_shutdown_returns() -> None:
    tasks = Tasks(LoopClock(), grace=0.01)
    recorder = HeldRecorder()  # never released
    reporter = Reporter(
        recorder, Context(ManualClock(), lambda: True, lambda _: None, tasks.background)
    )
    reporter.event(*about("a"), "Normal", "Woken", "o-1 created")
    await asyncio.sleep(0)  # the writer sends it and waits
    await tasks.aclose()
    assert (recorder.started, recorder.cancelled) == (1, 1)


async def test_work_a_loop_starts_on_its_way_out_is_ended_too_and_later_work_never_starts() -> None:
    tasks = Tasks(LoopClock(), grace=0.01)
    recorder = HeldRecorder()  # never released
    reporter = Reporter(
        recorder, Context(ManualClock(), lambda: True, lambda _: None, tasks.background)
    )

    async def worker() -> None:
        try:
            await asyncio.Event().wait()
        finally:  # as a cancelled worker leaves a wake's record and its Event behind
            reporter.event(*about("a"), "Normal", "Woken", "o-1 created")

    tasks.spawn(worker())
    await asyncio.sleep(0)
    await tasks.aclose()
    reporter.event(*about("b"), "Normal", "Woken", "o-2 created")  # after shutdown
    await asyncio.sleep(0)
    assert (recorder.started, recorder.cancelled) == (1, 1)


async def test_a_background_failure_is_logged_when_it_happens_not_left_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unhandled: list[str] = []

    async def closed_client() -> None:
        raise RuntimeError("Cannot send a request, as the client has been closed.")

    asyncio.get_running_loop().set_exception_handler(
        lambda _loop, context: unhandled.append(str(context["message"]))
    )
    tasks = Tasks(LoopClock(), grace=1.0)
    tasks.background(closed_client())
    await tasks.aclose()
    gc.collect()
    assert unhandled == []
    assert "background work failed" in caplog.text
    assert "client has been closed" in caplog.text
