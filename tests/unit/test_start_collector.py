"""The collector's pause at a start, as the controller runs it over a faked API: it ends once the
start is caught up, or once a start that gets nowhere has stalled; the housekeeping leaves it
alone while it lasts."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Iterator

import httpx
import pytest

import zeroscaler.controller.assembly as assembly
from bench.workload_state import FakeAPI
from zeroscaler.api import Kube
from zeroscaler.api.credentials import ClusterAccess
from zeroscaler.controller.flags import ControllerSettings

LIMIT = 60.0  # seconds for what must come at once: a bound to fail at, never a timing


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    gc.enable() if enabled else gc.disable()


class _Stuck(FakeAPI):
    """An API server that never answers the Deployments' list: the start gets nowhere."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/apis/apps/v1/deployments" and "watch" not in request.url.params:
            await asyncio.Event().wait()
        return await super().__call__(request)


def _controller(api: FakeAPI) -> assembly.Controller:
    settings = ControllerSettings(streaming_lists=False, metrics_port=0)
    kube = Kube(ClusterAccess(server="https://127.0.0.1:1"), transport=httpx.MockTransport(api))
    return assembly.Controller(kube, settings)


async def _until(what: str, holds: Callable[[], object]) -> None:
    for _ in range(int(LIMIT / 0.01)):
        if holds():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def test_the_housekeeping_collects_nothing_until_the_start_is_caught_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    collected: list[bool] = []  # whether the collector was running at each housekeeping round
    monkeypatch.setattr(assembly, "HOUSEKEEPING_INTERVAL", 0.001)
    monkeypatch.setattr(
        assembly, "release_free_memory", lambda full=False: collected.append(gc.isenabled())
    )
    scaler = _controller(FakeAPI(200))
    run = asyncio.create_task(scaler.run())
    try:
        await _until("collector running again", gc.isenabled)
        await _until("a round after the start", lambda: collected)
        assert all(collected)  # no round ran while the start's pause lasted
        assert len(scaler.workloads) == 200
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)


async def test_a_start_that_gets_nowhere_runs_the_collector_again_at_the_stall_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(assembly, "STALL_BOUND", 0.2)
    monkeypatch.setattr(assembly, "PROGRESS_LOOK", 0.01)
    scaler = _controller(_Stuck(200))
    run = asyncio.create_task(scaler.run())
    try:
        with caplog.at_level(logging.WARNING, logger="zeroscaler"):
            await _until("the stall logged", lambda: "start stalled" in caplog.text)
        assert gc.isenabled()
        assert not scaler.ready  # never caught up: the Deployments were never listed
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
