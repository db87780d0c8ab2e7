"""What the controller's parts share, each handed over as one value: the context (the clock,
whether this replica leads, the work queue and the background tasks), and what a workload's
watches are resolved and held against."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from zeroscaler.cluster.view import ClusterView
from zeroscaler.controller.permissions import AccessReviews
from zeroscaler.controller.watches import WatchHub
from zeroscaler.controller.workload import WorkloadKey
from zeroscaler.runtime.clock import Clock

Background = Callable[[Coroutine[Any, Any, None]], None]


@dataclass(frozen=True, slots=True)
class Context:
    """The four things most parts need and none owns: each part reads the time from `clock`,
    writes only while `is_leader()`, asks for a reconcile with `enqueue`, and runs work beside
    the workers with `background`."""

    clock: Clock
    is_leader: Callable[[], bool]
    enqueue: Callable[[WorkloadKey], None]
    background: Background


@dataclass(frozen=True, slots=True)
class Watching:
    """What a workload's watches are resolved and held against: the shared watches, the access
    reviews that say where its ServiceAccount may watch, and the cluster view (discovery, RBAC,
    namespaces)."""

    hub: WatchHub[WorkloadKey]
    access: AccessReviews
    cluster: ClusterView
