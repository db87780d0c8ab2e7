"""Leader election with a coordination.k8s.io Lease: one replica acts, the others stand by warm."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from zeroscaler.api import Conflict, Kube, KubeError, NotFound, Obj, Priority, prioritized
from zeroscaler.runtime.clock import Clock

log = logging.getLogger(__name__)

# A standby asks this often at most, so a released Lease is taken over within seconds, whatever
# its duration (client-go's default retry period).
RETRY_PERIOD = 2.0


def _micro_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaseTerms:
    """The Lease to hold (`namespace`/`name`), whom for, and for how many seconds."""

    namespace: str
    name: str
    identity: str
    duration: float


class LeaderElector:
    """Holds or waits for the Lease; `on_change(True/False)` is called when leadership changes.
    Its times come from `clock`: the Lease's times from its wall clock, a Lease's expiry and its
    own renewals judged on its monotonic time."""

    def __init__(
        self, kube: Kube, terms: LeaseTerms, clock: Clock, on_change: Callable[[bool], None]
    ) -> None:
        namespace, name = terms.namespace, terms.name
        self._kube = kube
        self._clock = clock
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._namespace, self._name = namespace, name
        self.identity = terms.identity
        self.duration = terms.duration
        self._on_change = on_change
        self.is_leader = False
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0  # monotonic time it was first seen: expiry is judged on our clock
        self._renewed_at = 0.0
        self._written = ""  # resourceVersion of our own last write while holding the Lease

    async def run(self) -> None:
        """Renew every third of the lease duration, or try to acquire it, until cancelled."""
        while True:
            try:
                # Renewals go before every waiting request: a renewal stuck behind a backlog of
                # writes would let the Lease expire under a leader that still writes.
                with prioritized(Priority.URGENT):
                    held = await self._attempt()
            except KubeError as e:
                log.warning("lease attempt failed: %s", e, extra={"lease": self._name})
                held = self.is_leader and self._clock.monotonic() - self._renewed_at < self.duration
            self._set(held)
            await asyncio.sleep(self.duration / 3 if held else min(self.duration / 5, RETRY_PERIOD))

    async def release(self, drain: Callable[[], Awaitable[None]]) -> None:
        """Give the Lease up at shutdown so a standby takes over at once: first no new write
        starts, then `drain` lets those on their way land, and only then is the Lease freed, so
        the next leader never writes beside them."""
        if self.is_leader:
            self._on_change(False)
        await drain()
        if not self.is_leader:
            return
        self._set(False)
        try:
            with prioritized(Priority.URGENT):
                lease = await self._kube.get(self._path)
                if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    rv = lease["metadata"]["resourceVersion"]
                    await self._kube.patch(
                        self._path,
                        {
                            "metadata": {"resourceVersion": rv},
                            "spec": {"holderIdentity": None, "leaseDurationSeconds": 1},
                        },
                    )
        except KubeError as e:
            log.warning("could not release the lease: %s", e)

    async def _attempt(self) -> bool:
        """One try at acquiring or renewing the Lease, at the clock's time."""
        now, wall = self._clock.monotonic(), _micro_time(self._clock.now())
        if self.is_leader and self._written:
            # A holder renews over its own last write without reading the Lease first (as
            # client-go does): one request a renewal, not two. Any other write since then fails
            # the precondition, and the Lease is read as a standby would.
            renewal: Obj = {
                "metadata": {"resourceVersion": self._written},
                "spec": {"renewTime": wall},
            }
            try:
                return self._wrote(await self._kube.patch(self._path, renewal), now)
            except (Conflict, NotFound):
                self._written = ""
        try:
            lease = await self._kube.get(self._path)
        except NotFound:
            body: Obj = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": self._spec(wall, transitions=0),
            }
            try:
                return self._wrote(await self._kube.create(self._path.rsplit("/", 1)[0], body), now)
            except Conflict:
                return False
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        seen = (holder, str(spec.get("renewTime") or ""))
        if seen != self._observed:
            self._observed, self._observed_at = seen, now
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        rv = lease["metadata"]["resourceVersion"]
        if holder == self.identity:
            patch: Obj = {"metadata": {"resourceVersion": rv}, "spec": {"renewTime": wall}}
        elif not holder or now - self._observed_at > duration:
            transitions = int(spec.get("leaseTransitions") or 0) + 1
            patch = {"metadata": {"resourceVersion": rv}, "spec": self._spec(wall, transitions)}
        else:
            return False
        try:
            return self._wrote(await self._kube.patch(self._path, patch), now)
        except Conflict:
            return False

    def _wrote(self, lease: Obj, now: float) -> bool:
        self._written = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        self._renewed_at = now
        return True

    def _spec(self, wall: str, transitions: int) -> Obj:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.duration)),
            "acquireTime": wall,
            "renewTime": wall,
            "leaseTransitions": transitions,
        }

    def _set(self, held: bool) -> None:
        if held != self.is_leader:
            self.is_leader = held
            log.info(
                "became leader" if held else "stopped leading",
                extra={"lease": f"{self._namespace}/{self._name}", "id": self.identity},
            )
            self._on_change(held)
