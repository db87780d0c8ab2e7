"""What the activator covers now, as the API server is told: the activator's configuration.

Only paths that configuration holds are activations. Each carries a token that only those who may
read webhook configurations can see, so a caller who merely reaches the webhook's port cannot
name one; and each comes with the matching fields it was copied from, so a request its rules
would never send there is told apart. A path not in the watched copy is looked up once more in
a fresh read (at most once a second), since a configuration written a moment ago may reach the
API server before this watch; a path taken out stays good for a grace period, for the same
reason the other way round.
"""

from __future__ import annotations

import asyncio
import logging

from zeroscaler.api import Kube, KubeError, Obj
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.core.coverage import CoveredEntry, covered_entries, request_key

log = logging.getLogger(__name__)

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
GRACE = 30.0  # seconds a path taken out of the configuration still counts
FRESH_READ_EVERY = 1.0  # seconds between reads made for a path the watch does not know


class CoveredPaths:
    """The activator configuration, watched by name; its paths and the entries behind them."""

    def __init__(self, kube: Kube | None, configuration: str) -> None:
        self._kube = kube
        self._configuration = configuration
        self._entries: dict[str, CoveredEntry] = {}
        self._gone: dict[str, tuple[CoveredEntry, float]] = {}  # path: entry, when taken out
        self._last_fresh = -FRESH_READ_EVERY
        self._reading: asyncio.Lock = asyncio.Lock()
        self.informer: Informer | None = None
        if kube is not None and configuration:
            self.informer = Informer(
                kube,
                CONFIGURATIONS,
                params={"fieldSelector": f"metadata.name={configuration}"},
                transform=_trim,
            )
            self.informer.add_handler(self._on_configuration)

    @property
    def enabled(self) -> bool:
        return self.informer is not None

    def covered_keys(self) -> frozenset[str]:
        """The activator requests ConfigMap's keys of the backends covered now."""
        return frozenset(request_key(*e.target.key) for e in self._entries.values())

    async def entry(self, path: str) -> CoveredEntry | None:
        """The covered webhook called at `path`, or None when nothing covered is called there."""
        if not self.enabled:
            return None
        now = asyncio.get_running_loop().time()
        found = self._entries.get(path) or self._recently_gone(path, now)
        if found is not None or now - self._last_fresh < FRESH_READ_EVERY:
            return found
        async with self._reading:
            if now - self._last_fresh < FRESH_READ_EVERY:
                return self._entries.get(path)
            self._last_fresh = now
            await self._read_fresh()
        return self._entries.get(path)

    def _recently_gone(self, path: str, now: float) -> CoveredEntry | None:
        gone = self._gone.get(path)
        if gone is None:
            return None
        if now - gone[1] > GRACE:
            del self._gone[path]
            return None
        return gone[0]

    async def _read_fresh(self) -> None:
        assert self._kube is not None
        try:
            obj = await self._kube.get(f"{CONFIGURATIONS}/{self._configuration}")
        except KubeError as e:
            log.warning("the activator configuration could not be read: %s", e)
            return
        self._set(covered_entries(obj))

    def _on_configuration(self, event: WatchEvent) -> None:
        self._set({} if event.type == "DELETED" else event.obj["entries"])

    def _set(self, entries: dict[str, CoveredEntry]) -> None:
        now = asyncio.get_running_loop().time()
        for path, entry in self._entries.items():
            if path not in entries:
                self._gone[path] = (entry, now)
        for path in entries:
            self._gone.pop(path, None)
        self._entries = entries


def _trim(obj: Obj) -> Obj:
    """Keep what an activation reads: each covered path and its entry."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "resourceVersion") if k in meta}
    return {"metadata": kept, "entries": covered_entries(obj)}
