"""What a sleeper gives back: the CPU and memory its pods request, read from its pod template."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Kubernetes quantities: a number, then a binary (Ki..Ei), decimal (n..E) or exponent suffix.
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_SUFFIX = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


@dataclass(frozen=True, slots=True)
class Requests:
    """CPU (cores) and memory (bytes) one pod requests."""

    cpu: float = 0.0
    memory: float = 0.0

    def times(self, replicas: int) -> Requests:
        return Requests(self.cpu * replicas, self.memory * replicas)

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.cpu + other.cpu, self.memory + other.memory)


NONE = Requests()


def parse_quantity(text: object) -> float | None:
    """A Kubernetes quantity (`100m`, `1.5`, `512Mi`, `1e3`) as a number; None if it is not one."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str):
        return None
    m = _QUANTITY.match(text.strip())
    if m is None:
        return None
    number, suffix = float(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * 10.0 ** int(suffix[1:])
    return number * _SUFFIX[suffix]


def pod_requests(pod_spec: Mapping[str, Any]) -> Requests:
    """What one pod of the template requests while it runs: its containers' requests (a limit
    stands for a request left out, as the API server defaults it), and its sidecars' (init
    containers that keep running, `restartPolicy: Always`)."""
    running = [*(pod_spec.get("containers") or [])]
    running += [
        c
        for c in pod_spec.get("initContainers") or []
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
    ]
    total = NONE
    for container in running:
        if not isinstance(container, Mapping):
            continue
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        cpu = parse_quantity(requests.get("cpu", limits.get("cpu")))
        memory = parse_quantity(requests.get("memory", limits.get("memory")))
        total += Requests(max(cpu or 0.0, 0.0), max(memory or 0.0, 0.0))
    return total


def format_cpu(cores: float) -> str:
    """Cores as kubectl writes them: `250m`, `2`, `1.5`."""
    if cores <= 0:
        return "0"
    if cores < 1:
        return f"{round(cores * 1000)}m"
    return f"{cores:.3f}".rstrip("0").rstrip(".")


def format_memory(size: float) -> str:
    """Bytes in binary units: `512Mi`, `1.5Gi`."""
    for unit, scale in (("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20), ("Ki", 2.0**10)):
        if size >= scale:
            return f"{size / scale:.1f}".rstrip("0").rstrip(".") + unit
    return f"{round(size)}"
