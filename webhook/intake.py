"""What one request may cost the webhook: its size, the bodies held at once, and time to send it.

Any pod can reach the webhook's port, so a request is not trusted to be small, quick or
well-formed. A body larger than one real AdmissionReview can be is refused unread; bodies in
flight share a byte budget, so many large requests wait their turn (or are turned away) instead
of adding up past the pod's memory; a body that takes too long to arrive is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from zeroscaler.core.admission import AdmissionReview
from zeroscaler.webhook.review import BadReview, parse_review

# The API server stores objects of up to 1.5 MiB (etcd's default request limit) and takes request
# bodies of up to 3 MiB; a review carries the object and the old object, in JSON, and a little more.
REVIEW_LIMIT = 4 * 1024 * 1024


class Refused(Exception):
    """A request not taken: the HTTP status to answer with and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one request, and all of them together, may cost."""

    max_body: int = REVIEW_LIMIT  # bytes of one review
    budget: int = 4 * REVIEW_LIMIT  # bytes of bodies held at once, by every request together
    read_timeout: float = 10.0  # seconds to wait for the budget and then for the body


class Intake:
    """Reads reviews within `Limits`: one byte budget shared by every endpoint of the webhook."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._free = limits.budget
        self._freed = asyncio.Condition()

    @property
    def held(self) -> int:
        """Bytes of the budget held by requests now."""
        return self.limits.budget - self._free

    async def review(self, request: Request) -> AdmissionReview:
        """The request's AdmissionReview, or Refused: 400 malformed or too large, 408 too slow,
        503 while the budget stays spent for longer than the read timeout."""
        limit = self.limits.max_body
        declared = _content_length(request)
        if declared is not None and declared > limit:
            raise Refused(400, f"body is over {limit} bytes")
        # Without a length (chunked), the most it may grow to is held.
        held = min(limit, declared) if declared is not None else limit
        taken = False
        try:
            async with asyncio.timeout(self.limits.read_timeout):
                await self._take(held)
                taken = True
                # Parsed here, on the loop: json.loads holds the GIL throughout, so a thread would
                # not spare the loop the wait; the budget bounds what it costs.
                try:  # the budget is held until the body is parsed: parsing doubles it
                    body = await _read(request, limit)
                    if body is None:
                        raise Refused(400, f"body is over {limit} bytes")
                    return parse_review(body)
                finally:
                    await self._give(held)
        except BadReview as e:
            raise Refused(400, str(e)) from None
        except TimeoutError:
            if not taken:
                raise Refused(503, "busy: too many large requests at once") from None
            raise Refused(408, f"body not received within {self.limits.read_timeout:g}s") from None

    @contextlib.asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        """Hold `size` bytes of the budget for a while (waiting until they are free)."""
        await self._take(size)
        try:
            yield
        finally:
            await self._give(size)

    async def _take(self, size: int) -> None:
        async with self._freed:
            await self._freed.wait_for(lambda: self._free >= size)
            self._free -= size

    async def _give(self, size: int) -> None:
        async with self._freed:
            self._free += size
            self._freed.notify_all()


def refusal(refused: Refused) -> Response:
    """The answer to a request not taken; a 400 says what is malformed."""
    message = f"malformed AdmissionReview: {refused}" if refused.status == 400 else str(refused)
    return JSONResponse({"message": message}, status_code=refused.status)


def _content_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    if value is None or not value.isdigit():
        return None
    return int(value)


async def _read(request: Request, limit: int) -> bytes | None:
    """The body, or None once it grows past `limit` bytes (read no further)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
