"""Whether a woken workload is Ready, from the status its controller in kube-controller-manager
writes, and how long one that never is stays up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIN_START_BOUND = 600.0  # seconds: a slow starter gets at least ten minutes more than its timeout


def is_ready(
    spec: Mapping[str, Any], status: Mapping[str, Any] | None, generation: Any
) -> bool | None:
    """Ready replicas reach spec.replicas in a status that saw the current spec; None when the
    workload has no readiness to wait for (a paused Deployment makes no pods)."""
    if spec.get("paused"):
        return None
    if not status:
        return int(spec.get("replicas") or 0) == 0  # no pods reported yet
    observed = status.get("observedGeneration")
    if isinstance(observed, int) and isinstance(generation, int) and observed < generation:
        return False  # the status predates the scale-up
    return int(status.get("readyReplicas") or 0) >= int(spec.get("replicas") or 0)


def start_bound(timeout: float) -> float:
    """Seconds past its idle timeout a woken workload that never becomes Ready stays up."""
    return max(timeout, MIN_START_BOUND)
