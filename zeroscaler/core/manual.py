"""A person's own sleep and wake (`zeroscaler sleep`, `zeroscaler wake`): what is done, or why not.

They make the transitions the controller makes, with the same status annotations, so the controller
reads the result as its own: a manual sleep lasts until activity after it, a manual wake (or a wake
of an awake workload) restarts the idle clock at `last-activity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from zeroscaler.core.annotations import (
    ENABLED,
    IDLE_TIMEOUT,
    NAMESPACE_ENABLED_LABEL,
    PAUSED,
    PAUSED_UNTIL,
    WorkloadConfig,
    WorkloadStatus,
    asleep_annotations,
    awake_annotations,
)
from zeroscaler.core.decision import wake_replicas
from zeroscaler.core.durations import format_time

ManualAction = Literal["sleep", "wake", "restart-clock", "none"]


@dataclass(frozen=True, slots=True)
class Manual:
    """What a person's request comes to: the scale, the status to write, and what to say."""

    action: ManualAction
    replicas: int = 0  # remembered (sleep) or scaled to (wake)
    annotations: Mapping[str, str] = field(default_factory=dict)
    message: str = ""


class Refused(Exception):
    """A request that would do harm or be undone at once; the message says why and what to do."""


def plan_pause(annotations: Mapping[str, str], until: datetime | None) -> dict[str, str | None]:
    """The annotation changes that hold a workload: until resumed (`paused: "true"`), or until a
    time (`paused-until`, always written as a time, so nobody need know when it was written).
    A pause replaces the one before. Empty: paused so already."""
    wanted: dict[str, str | None] = (
        {PAUSED: "true", PAUSED_UNTIL: None}
        if until is None
        else {PAUSED: None, PAUSED_UNTIL: format_time(until)}
    )
    return {k: v for k, v in wanted.items() if annotations.get(k) != v}


def plan_resume(annotations: Mapping[str, str]) -> dict[str, str | None]:
    """The annotation changes that end a pause of either kind; empty when not paused."""
    return {k: None for k in (PAUSED, PAUSED_UNTIL) if k in annotations}


def is_paused(annotations: Mapping[str, str]) -> bool:
    """Whether a person holds the workload as it is (`zeroscaler.io/paused: "true"`)."""
    return annotations.get(PAUSED, "").strip().lower() == "true"


def unmanaged_reason(
    config: WorkloadConfig, namespace: str, namespace_labels: Mapping[str, str] | None
) -> str:
    """Why zeroscaler does not manage the workload, or "" when it does (labels None: unknown)."""
    if namespace_labels is not None and namespace_labels.get(NAMESPACE_ENABLED_LABEL) != "true":
        return f'namespace {namespace} is not opted in (label {NAMESPACE_ENABLED_LABEL}: "true")'
    if config.opted_out:
        return f'opted out ({ENABLED}: "false")'
    if config.idle_timeout is None:
        return f"it has no idle timeout ({IDLE_TIMEOUT})"
    return ""


def _refuse_if_paused(annotations: Mapping[str, str]) -> None:
    if is_paused(annotations):
        raise Refused(f'it is paused ({PAUSED}: "true"); zeroscaler resume it first')


def plan_sleep(
    config: WorkloadConfig,
    status: WorkloadStatus,
    replicas: int,
    annotations: Mapping[str, str],
    unmanaged: str,
    now: datetime,
) -> Manual:
    """Put to sleep now, remembering the replicas; refused where nothing would wake it again."""
    _refuse_if_paused(annotations)
    if unmanaged:
        raise Refused(f"zeroscaler does not manage it ({unmanaged}), so nothing would wake it")
    if status.state == "asleep" and replicas == 0:
        return Manual("none", message="already asleep")
    if replicas == 0:
        raise Refused("it is at 0 replicas already, scaled down by someone else")
    return Manual("sleep", replicas, asleep_annotations(replicas, now, now))


def plan_wake(
    config: WorkloadConfig,
    status: WorkloadStatus,
    replicas: int,
    annotations: Mapping[str, str],
    unmanaged: str,
    now: datetime,
) -> Manual:
    """Wake to the replicas the controller would; awake already, restart its idle clock."""
    _refuse_if_paused(annotations)
    if status.state == "asleep" and replicas == 0:
        return Manual("wake", wake_replicas(config, status), awake_annotations(now))
    if replicas == 0:
        raise Refused(
            "it is at 0 replicas but zeroscaler did not put it to sleep, so there is no count "
            "to restore; scale it yourself (kubectl scale --replicas=N)"
        )
    if unmanaged:
        raise Refused(f"zeroscaler does not manage it ({unmanaged}); there is no idle clock")
    return Manual("restart-clock", replicas, awake_annotations(now))
