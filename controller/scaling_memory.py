"""What sleeps and wakes (`scaling.py`) remember of a workload between writes: declared here,
below the parts, and written by `scaling.py` alone (others ask it: `Scaling.status_read`,
`settle_dry_run`, `forget`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zeroscaler.core.annotations import WorkloadStatus
from zeroscaler.core.flapping import Streak

NO_STREAK = Streak()


@dataclass(frozen=True, slots=True)
class OwnWake:
    """A wake the controller scaled up but has not yet recorded in the status annotations
    (`ScalingMemory.own_wake`)."""

    replicas: int
    reason: str
    latency: float | None  # seconds from the waking event to the scale write's answer
    cause: str = ""  # what woke it, for flapping ("": nothing that counts)


@dataclass(slots=True)
class ScalingMemory:
    """What `scaling.py` remembers between writes."""

    # Scaled up by us, still annotated asleep: in memory, so a failed record is not read as a
    # wake by someone else (only a crash before the record loses it).
    own_wake: OwnWake | None = None
    streak: Streak = NO_STREAK  # wakes in a row by the same cause (flapping)
    # The annotations as last read while they held our status: a manager's full update that
    # drops them (OLM's reinstall) is told from them, and they are written back.
    recorded: Mapping[str, str] | None = None
    pretend: tuple[WorkloadStatus, int] | None = None  # dry run: the status we would have made
    dry_run: str | None = None  # why only what would be done is said (flag, namespace, policy)
