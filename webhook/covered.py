"""What the activator covers now, as the API server is told: the activator's configuration.

Only paths that configuration holds are activations. Each carries a token that only those who may
read webhook configurations can see, so a caller who merely reaches the webhook's port cannot
name one; and each comes with the matching fields it was copied from, so a request its rules
would never send there is told apart.
"""

from __future__ import annotations

from zeroscaler.api import Kube
from zeroscaler.core.coverage import CoveredEntry, covered_entries, request_key
from zeroscaler.runtime.clock import Clock
from zeroscaler.webhook.configuration_watch import ConfigurationPaths


class CoveredPaths(ConfigurationPaths[CoveredEntry]):
    """The activator configuration, watched by name: its paths and the entries behind them."""

    def __init__(self, kube: Kube | None, configuration: str, clock: Clock | None = None) -> None:
        super().__init__(kube, configuration, covered_entries, clock)

    @property
    def enabled(self) -> bool:
        return self.informer is not None

    def covered_keys(self) -> frozenset[str]:
        """The activator requests ConfigMap's keys of the backends covered now."""
        return frozenset(request_key(*e.target.key) for e in self.known.values())

    async def entry(self, path: str) -> CoveredEntry | None:
        """The covered webhook called at `path`, or None when nothing covered is called there."""
        return await self.find(path)
