"""The pacer: concurrency that halves on a 429 and grows back, Retry-After holds, a token bucket."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.unit.mock_api import kube_served_by
from zeroscaler.api import (
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    Kube,
    KubeError,
    NotFound,
    Priority,
    Transient,
    Withdrawn,
    error_for,
    prioritized,
    urgently,
)
from zeroscaler.core.pacing import (
    DEFAULT_RETRY_AFTER,
    MAX_RETRY_AFTER,
    Pacer,
    parse_retry_after,
    wake_retry_after,
)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("1", 1.0),
        ("7", 7.0),
        (" 2 ", 2.0),
        ("0", 0.0),
        (None, DEFAULT_RETRY_AFTER),
        ("Wed, 21 Oct 2026 07:28:00 GMT", DEFAULT_RETRY_AFTER),
        ("-3", DEFAULT_RETRY_AFTER),
        ("nan", DEFAULT_RETRY_AFTER),
        ("3600", MAX_RETRY_AFTER),
    ],
)
def test_retry_after_is_read_as_seconds_capped_and_defaulted_when_unreadable(
    header: str | None, seconds: float
) -> None:
    assert parse_retry_after(header) == seconds


@pytest.mark.parametrize(
    ("failures", "seconds"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (10, 5.0), (100_000, 5.0), (0, 1.0)],
)
def test_a_failing_wake_backs_off_from_one_second_to_five(failures: int, seconds: float) -> None:
    assert wake_retry_after(failures) == seconds


def test_concurrency_bounds_requests_in_flight() -> None:
    pacer = Pacer(concurrency=2)
    assert pacer.start(10.0) == 0.0
    assert pacer.start(10.0) == 0.0
    assert pacer.start(10.0) is None
    pacer.finish(10.1)
    assert pacer.start(10.1) == 0.0


def test_a_429_holds_everything_for_its_retry_after_and_halves_the_limit_once() -> None:
    pacer = Pacer(concurrency=8)
    for _ in range(4):
        assert pacer.start(0.0) == 0.0
    pacer.finish(1.0, retry_after=2.0)  # the first 429: hold until 3.0
    pacer.finish(1.1, retry_after=2.0)  # its echoes, in the same hold: no further halving
    pacer.finish(1.2, retry_after=2.0)
    assert pacer.limit == 4.0
    assert pacer.hold_until == 3.2
    assert pacer.start(1.5) == pytest.approx(1.7)  # waits out the hold
    pacer.finish(3.5, retry_after=1.0)  # a 429 after the hold: halves again
    assert pacer.limit == 2.0


def test_the_limit_grows_back_by_about_one_per_limit_answers() -> None:
    pacer = Pacer(concurrency=4)
    pacer.start(0.0)
    pacer.finish(0.0, retry_after=0.0)
    pacer.start(0.0)
    pacer.finish(0.0, retry_after=0.0)
    assert pacer.limit == 1.0
    pacer.start(0.0)
    pacer.finish(0.1)
    assert pacer.limit == 2.0
    for _ in range(3):  # 2 + 1/2 + 1/2.5 + 1/2.9
        pacer.start(0.2)
        pacer.finish(0.2)
    assert 3.0 < pacer.limit < 3.5
    for _ in range(100):
        pacer.start(0.3)
        pacer.finish(0.3)
    assert pacer.limit == 4.0  # never above the configured concurrency


def test_token_bucket_lets_a_burst_through_then_paces_at_qps() -> None:
    pacer = Pacer(concurrency=100, qps=10.0, burst=3)
    waits = [pacer.start(0.0) for _ in range(5)]
    assert waits == [0.0, 0.0, 0.0, pytest.approx(0.1), pytest.approx(0.2)]
    assert pacer.start(1.0) == 0.0  # refilled meanwhile (to 5 tokens' worth, minus the debt)


def test_no_qps_means_no_rate_limit() -> None:
    pacer = Pacer(concurrency=1000)
    assert all(pacer.start(0.0) == 0.0 for _ in range(1000))


def test_cancelled_requests_free_their_place() -> None:
    pacer = Pacer(concurrency=1)
    assert pacer.start(0.0) == 0.0
    pacer.cancel()
    assert pacer.start(0.0) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"concurrency": 1, "qps": -1.0}, "qps must be >= 0"),
        ({"concurrency": 1, "burst": 0}, "burst >= 1"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pacer(**kwargs)  # type: ignore[arg-type]


def _kube(answers: list[int], *, retries: int = 10, concurrency: int = 4) -> tuple[Kube, list[int]]:
    """A Kube whose transport answers with `answers` in turn (429s with Retry-After: 0)."""
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        status = answers[min(len(sent), len(answers) - 1)]
        sent.append(status)
        headers = {"Retry-After": "0"} if status == 429 else {}
        return httpx.Response(status, headers=headers, json={"kind": "Status"})

    kube = kube_served_by(handler, concurrency)
    kube.retries = retries
    return kube, sent


async def test_a_429_is_sent_again_and_counted() -> None:
    kube, sent = _kube([429, 429, 200])
    answer = await kube.patch("/apis/apps/v1/x/scale", {"spec": {"replicas": 1}})
    assert answer == {"kind": "Status"}
    assert sent == [429, 429, 200]
    assert kube.throttled == 2
    assert kube.pacer.in_flight == 0


async def test_a_watch_clients_429s_are_its_parents_and_a_components_are_its_own() -> None:
    kube, sent = _kube([429, 200, 429, 200, 429, 200])
    watcher, component = kube.dedicated(), kube.sharing()
    await watcher.patch("/apis/apps/v1/x/scale", {"spec": {"replicas": 1}})
    await kube.patch("/apis/apps/v1/x/scale", {"spec": {"replicas": 1}})
    await component.patch("/apis/apps/v1/x/scale", {"spec": {"replicas": 1}})
    assert sent == [429, 200] * 3
    assert (kube.throttled, watcher.throttled, component.throttled) == (2, 2, 1)
    await watcher.aclose()


async def test_429s_past_the_retries_raise_transient() -> None:
    kube, sent = _kube([429], retries=2)
    with pytest.raises(Transient) as e:
        await kube.get("/api/v1/namespaces")
    assert e.value.status == 429
    assert len(sent) == 3
    assert kube.pacer.in_flight == 0


async def test_requests_wait_for_a_place_and_all_get_one() -> None:
    kube, sent = _kube([200], concurrency=2)
    assert len(await asyncio.gather(*(kube.get(f"/x/{i}") for i in range(50)))) == 50
    assert len(sent) == 50
    assert kube.pacer.in_flight == 0


def _first_held() -> tuple[Kube, list[str], asyncio.Event]:
    """A Kube with one connection, whose request to /first is answered once the event is set;
    the paths sent, in order."""
    sent: list[str] = []
    gate = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if request.url.path == "/first":
            await gate.wait()
        return httpx.Response(200, json={})

    return kube_served_by(handler), sent, gate


async def test_urgent_requests_go_before_normal_ones_that_waited_longer() -> None:
    kube, sent, gate = _first_held()

    first = asyncio.create_task(kube.get("/first"))
    await asyncio.sleep(0.01)
    normal = [asyncio.create_task(kube.get(f"/normal-{i}")) for i in range(2)]
    await asyncio.sleep(0.01)
    urgent = asyncio.create_task(kube.patch("/urgent", {}, urgent=True))
    with urgently():  # a task started here makes urgent requests, a read too
        read = asyncio.create_task(kube.get("/urgent-read"))
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(first, *normal, urgent, read)

    assert sent == ["/first", "/urgent", "/urgent-read", "/normal-0", "/normal-1"]


async def test_waiting_requests_go_by_priority_then_in_order() -> None:
    kube, sent, gate = _first_held()

    first = asyncio.create_task(kube.get("/first"))
    await asyncio.sleep(0.01)
    waiting = []
    for level in (Priority.BACKGROUND, Priority.NORMAL, Priority.PROMPT, Priority.URGENT):
        with prioritized(level):  # a task started here waits at that level
            waiting.append(asyncio.create_task(kube.get(f"/{level.name.lower()}-1")))
        waiting.append(
            asyncio.create_task(kube.patch(f"/{level.name.lower()}-2", {}, priority=level))
        )
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(first, *waiting)

    levels = ("urgent", "prompt", "normal", "background")
    assert sent == ["/first", *(f"/{level}-{i}" for level in levels for i in (1, 2))]


async def test_a_request_withdrawn_while_waiting_is_never_sent() -> None:
    kube, sent, gate = _first_held()
    called_off = False

    first = asyncio.create_task(kube.get("/first"))
    await asyncio.sleep(0.01)
    sleep = asyncio.create_task(kube.patch("/sleep", {}, unless=lambda: called_off))
    after = asyncio.create_task(kube.get("/after"))
    await asyncio.sleep(0.01)
    called_off = True  # activity seen while the sleep waited
    gate.set()
    results = await asyncio.gather(first, sleep, after, return_exceptions=True)
    error = results[1]

    assert isinstance(error, Withdrawn)
    assert sent == ["/first", "/after"]
    assert kube.pacer.in_flight == 0


async def test_a_request_cancelled_while_waiting_gives_its_turn_to_the_next() -> None:
    kube, _, gate = _first_held()

    first = asyncio.create_task(kube.get("/first"))
    await asyncio.sleep(0.01)
    doomed = asyncio.create_task(kube.get("/doomed"))
    after = asyncio.create_task(kube.get("/after"))
    await asyncio.sleep(0.01)
    doomed.cancel()
    gate.set()
    await asyncio.gather(first, after)

    assert kube.pacer.in_flight == 0


async def test_settle_returns_once_the_requests_in_flight_are_answered() -> None:
    kube, sent, gate = _first_held()

    first = asyncio.create_task(kube.get("/first"))
    await asyncio.sleep(0.01)
    settling = asyncio.create_task(kube.settle())
    await asyncio.sleep(0.01)
    held = not settling.done()  # /first is still on its way
    gate.set()
    await asyncio.wait_for(settling, 1)
    await first

    assert (held, settling.done()) == (True, True)
    assert sent == ["/first"]


async def test_settle_with_nothing_in_flight_returns_at_once() -> None:
    kube, _, _ = _first_held()
    await asyncio.wait_for(kube.settle(), 1)


async def test_a_shared_client_counts_failures_per_component_and_paces_them_as_one() -> None:
    controller, sent = _kube([404])
    webhook = controller.sharing()
    with pytest.raises(NotFound):
        await webhook.get("/api/v1/namespaces/x")
    assert (dict(webhook.errors), dict(controller.errors)) == ({("GET", 404): 1}, {})
    with pytest.raises(NotFound):
        await controller.get("/api/v1/namespaces/y")
    assert (dict(webhook.errors), dict(controller.errors)) == ({("GET", 404): 1}, {("GET", 404): 1})
    assert webhook.pacer is controller.pacer
    assert len(sent) == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, Invalid),
        (401, Forbidden),
        (403, Forbidden),
        (404, NotFound),
        (409, Conflict),
        (410, Gone),
        (422, Invalid),
        (429, Transient),
        (503, Transient),
        (0, Transient),
    ],
)
def test_each_status_maps_to_the_error_that_says_how_to_react(
    status: int, error: type[KubeError]
) -> None:
    found = error_for(status, b'{"kind": "Status", "reason": "Why", "message": "what"}')
    assert type(found) is error
    assert (found.status, found.reason, found.message) == (status, "Why", "what")
