"""Where the API server calls the webhook: the paths its own configuration holds.

A review is answered only at one of them (`zeroscaler.core.webhook_paths`); the controller gives
a Service-backed webhook without a path a secret one.
"""

from __future__ import annotations

from collections.abc import Mapping

from zeroscaler.api import Kube, Obj
from zeroscaler.core.webhook_paths import MUTATE, paths_of
from zeroscaler.runtime.clock import Clock
from zeroscaler.webhook.configuration_watch import ConfigurationPaths


def _paths(obj: Obj) -> Mapping[str, bool]:
    return dict.fromkeys(paths_of(obj), True)


class OwnPaths(ConfigurationPaths[bool]):
    """The webhook's own configuration, watched by name: the paths reviews are taken at."""

    def __init__(self, kube: Kube | None, configuration: str, clock: Clock | None = None) -> None:
        super().__init__(kube, configuration, _paths, clock)

    async def accepts(self, path: str) -> bool:
        """Whether a review sent to `path` is one the API server sends to this webhook."""
        if self.informer is None:
            return path == MUTATE  # no configuration named: the one fixed path
        return bool(await self.find(path))
