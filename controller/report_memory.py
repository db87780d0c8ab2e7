"""What the controller has said and counted of a workload: declared here, below the parts that
keep it, `reporting.py`, `accounting.py` and `metrics.py`, each writing only its own field."""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroscaler.core.annotations import Notice
from zeroscaler.core.sharing import NOTHING


@dataclass(slots=True)
class WorkloadCounts:
    """What one workload's own metric series count (only while per-workload metrics are on):
    the metrics' memory of it (`ReportMemory.tally`)."""

    wakes: dict[str, int] = field(default_factory=dict)  # by reason
    sleeps: dict[str, int] = field(default_factory=dict)  # by reason
    saved: float = 0.0  # replica-seconds
    cpu_seconds: float = 0.0  # core-seconds of CPU requested by those replicas
    memory_seconds: float = 0.0  # byte-seconds of memory requested
    latency_sum: float = 0.0  # seconds, over the wakes that had a waking event
    latency_count: int = 0


@dataclass(slots=True)
class ReportMemory:
    """Three parts' memories in one object a workload (not three: at 100,000 workloads each
    object counts), each field written by its part alone."""

    warned: frozenset[Notice] = NOTHING  # `reporting.py`'s; replaced, never changed in place
    accounted_at: float | None = None  # `accounting.py`'s: loop time last counted
    tally: WorkloadCounts | None = None  # `metrics.py`'s own series; only while it is managed
