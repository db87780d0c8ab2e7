"""How fast to send requests: a token bucket, a concurrency limit that halves when the API server
answers 429 (API Priority and Fairness, max-requests-inflight) and grows back, and the hold that
its Retry-After asks for. Pure: the caller passes the time and does the waiting."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_RETRY_AFTER = 1.0  # seconds, when a 429 names none (the API server's own default)
MAX_RETRY_AFTER = 60.0  # a larger Retry-After is capped: a wake should not wait minutes
WAKE_RETRY_FIRST = 1.0  # seconds: a dropped connection must not hold an operator at zero long
WAKE_RETRY_CAP = 5.0  # in a long outage: a try every few seconds per workload, not every second


def wake_retry_after(failures: int) -> float:
    """Seconds before a wake that failed `failures` times in a row is tried again: 1 s, doubling."""
    doublings = min(max(failures - 1, 0), 16)  # bounded: a long outage makes no huge integer
    return min(WAKE_RETRY_FIRST * (1 << doublings), WAKE_RETRY_CAP)


def parse_retry_after(value: str | None) -> float:
    """Seconds a Retry-After header asks for (whole seconds; anything else: the default)."""
    if value is None:
        return DEFAULT_RETRY_AFTER
    try:
        seconds = float(value.strip())
    except ValueError:  # the HTTP-date form; the API server does not send it
        return DEFAULT_RETRY_AFTER
    if seconds != seconds or seconds < 0:  # NaN or negative
        return DEFAULT_RETRY_AFTER
    return min(seconds, MAX_RETRY_AFTER)


@dataclass(slots=True)
class Pacer:
    """Admits requests: at most `limit` in flight, at most `qps` a second after a `burst`.

    `qps` 0 means no rate limit. After a 429 nothing starts until its Retry-After has passed, and
    the concurrency limit halves (once per hold, so one burst of 429s halves it once); every
    answer that is not a 429 grows it back by about one per `limit` answers, up to `concurrency`.
    """

    concurrency: int
    qps: float = 0.0
    burst: int = 1
    # Its state, which it keeps itself.
    limit: float = field(default=0.0, init=False)
    in_flight: int = field(default=0, init=False)
    tokens: float = field(default=0.0, init=False)
    updated: float | None = field(default=None, init=False)
    hold_until: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.qps < 0 or self.burst < 1:
            raise ValueError(f"qps must be >= 0 and burst >= 1, not {self.qps} and {self.burst}")
        self.limit = float(self.concurrency)
        self.tokens = float(self.burst)

    def start(self, now: float) -> float | None:
        """Admit one request: seconds to wait before sending it, or None when none may start yet
        (too many in flight: ask again when one finishes)."""
        if self.in_flight >= int(self.limit):
            return None
        self.in_flight += 1
        wait = max(0.0, self.hold_until - now)
        if self.qps > 0:
            self._refill(now)
            self.tokens -= 1.0
            if self.tokens < 0:
                wait = max(wait, -self.tokens / self.qps)
        return wait

    def finish(self, now: float, retry_after: float | None = None) -> None:
        """A request admitted by `start` was answered; `retry_after` is set when it was a 429."""
        self.in_flight = max(0, self.in_flight - 1)
        if retry_after is None:
            self.limit = min(float(self.concurrency), self.limit + 1.0 / self.limit)
            return
        if now >= self.hold_until:  # the first 429 of a burst; the others are its echo
            self.limit = max(1.0, self.limit / 2)
        self.hold_until = max(self.hold_until, now + retry_after)

    def cancel(self) -> None:
        """A request admitted by `start` was never sent."""
        self.in_flight = max(0, self.in_flight - 1)

    def _refill(self, now: float) -> None:
        if self.updated is not None and now > self.updated:
            self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.qps)
        self.updated = now if self.updated is None else max(self.updated, now)
