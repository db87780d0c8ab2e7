"""What one request may cost the webhook, sent as a hostile caller would: bodies larger than a
review can be, bodies that never finish, many large bodies at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from zeroscaler.webhook.intake import Intake, Limits, Refused, refusal

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {"uid": "u1", "operation": "CREATE"},
}


def _app(intake: Intake, hold: asyncio.Event | None = None) -> FastAPI:
    """An endpoint that reads a review through `intake`, then (if given) waits on `hold`."""
    app = FastAPI()

    @app.post("/review")
    async def review(request: Request) -> Response:
        try:
            found = await intake.review(request)
        except Refused as e:
            return refusal(e)
        if hold is not None:
            await hold.wait()
        return JSONResponse({"uid": found["request"]["uid"], "held": intake.held})

    return app


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook")


async def _chunks(parts: list[bytes], pause: float = 0.0) -> AsyncIterator[bytes]:
    for part in parts:
        await asyncio.sleep(pause)
        yield part


def test_a_review_within_the_limits_is_read_and_the_budget_given_back() -> None:
    async def scenario() -> dict[str, Any]:
        intake = Intake(Limits(max_body=1000, budget=2000, read_timeout=1))
        async with _client(_app(intake)) as client:
            answer = await client.post("/review", json=REVIEW)
        assert intake.held == 0
        result: dict[str, Any] = answer.json()
        return result

    # The budget is given back once the body is parsed, before the endpoint answers.
    assert asyncio.run(scenario()) == {"uid": "u1", "held": 0}


@pytest.mark.parametrize("chunked", [False, True])
def test_an_oversized_body_is_refused_without_reading_past_the_limit(chunked: bool) -> None:
    body = json.dumps({**REVIEW, "padding": "x" * 5000}).encode()
    sent: list[int] = []

    async def counted() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 100):
            sent.append(i)
            yield body[i : i + 100]

    async def scenario() -> httpx.Response:
        intake = Intake(Limits(max_body=1000, budget=2000, read_timeout=1))
        async with _client(_app(intake)) as client:
            content: Any = counted() if chunked else body
            return await client.post("/review", content=content)

    answer = asyncio.run(scenario())
    assert answer.status_code == 400
    assert answer.json() == {"message": "malformed AdmissionReview: body is over 1000 bytes"}
    if chunked:  # read a chunk past the limit, and no further
        assert max(sent) <= 1100


def test_a_body_that_never_finishes_is_dropped_at_the_read_timeout() -> None:
    async def scenario() -> tuple[httpx.Response, int]:
        intake = Intake(Limits(max_body=1000, budget=2000, read_timeout=0.2))
        async with _client(_app(intake)) as client:
            slow = _chunks([b'{"apiVersion":', b'"admission.k8s.io/v1"'], pause=0.5)
            answer = await client.post("/review", content=slow)
        return answer, intake.held

    answer, held = asyncio.run(scenario())
    assert answer.status_code == 408
    assert held == 0


def test_a_body_gives_its_share_of_the_budget_back_once_parsed() -> None:
    body = json.dumps({**REVIEW, "padding": "x" * 600}).encode()  # ~700 bytes: two fit at once

    async def scenario() -> list[int]:
        hold = asyncio.Event()
        intake = Intake(Limits(max_body=1000, budget=1500, read_timeout=0.3))
        async with _client(_app(intake, hold)) as client:
            first = [asyncio.create_task(client.post("/review", content=body)) for _ in range(2)]
            await asyncio.sleep(0.05)
            # The endpoint holds the first two, but their share of the budget went back once
            # their bodies were parsed: four more come in meanwhile.
            more = [asyncio.create_task(client.post("/review", content=body)) for _ in range(4)]
            await asyncio.sleep(0.05)
            hold.set()
            answers = await asyncio.gather(*first, *more)
        return [a.status_code for a in answers]

    assert asyncio.run(scenario()) == [200] * 6


def test_a_body_that_needs_more_than_is_free_for_the_read_timeout_is_answered_busy() -> None:
    body = json.dumps({**REVIEW, "padding": "x" * 600}).encode()

    async def scenario() -> list[int]:
        intake = Intake(Limits(max_body=1000, budget=1000, read_timeout=0.2))
        async with _client(_app(intake)) as client:
            async with intake.hold(500):
                turned = await client.post("/review", content=body)
            admitted = await client.post("/review", content=body)
            return [turned.status_code, admitted.status_code]

    assert asyncio.run(scenario()) == [503, 200]
