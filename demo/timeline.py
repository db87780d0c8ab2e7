"""What the demo saw, sampled while it runs: replicas, each pod's state, and the story's events."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from localcluster.cluster import Cluster

_POLL = 0.1  # seconds between samples: the resolution of the latencies the demo reports
STATES = ("Pending", "ContainerCreating", "Running", "Terminating")
COLOURS = {
    "Pending": "#f2c14e",
    "ContainerCreating": "#f78154",
    "Running": "#4d9078",
    "Terminating": "#b4b4b4",
}


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at the Deployment and its pods, `t` seconds after the recorder started."""

    t: float
    replicas: int
    pods: dict[str, str]  # pod name -> state (one of STATES)


@dataclass(frozen=True, slots=True)
class Mark:
    """A moment of the story, drawn as a line on the timeline."""

    t: float
    label: str


def pod_state(pod: dict[str, Any]) -> str:
    """The state a reader cares about: Pending, ContainerCreating, Running or Terminating."""
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status", {})
    if status.get("phase") == "Running":
        return "Running"
    if status.get("phase") == "Pending" and pod.get("spec", {}).get("nodeName"):
        return "ContainerCreating"
    return "Pending"


@dataclass
class Recorder:
    """Samples the Deployment `namespace/name` and its pods in a thread; prints each change."""

    cluster: Cluster
    namespace: str
    name: str
    say: Callable[[str], None]
    began: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Recorder:
        self._thread = threading.Thread(target=self._run, name="demo-recorder", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def now(self) -> float:
        return time.monotonic() - self.began

    def mark(self, label: str, at: float | None = None) -> float:
        """Record a moment of the story (now, or `at`); returns its time on the timeline."""
        t = self.now() if at is None else at
        with self._lock:
            self.marks.append(Mark(t, label))
            self.marks.sort(key=lambda m: m.t)
        return t

    def latest(self) -> Sample | None:
        with self._lock:
            return self.samples[-1] if self.samples else None

    def first_after(self, since: float, check: Callable[[Sample], bool]) -> float | None:
        """The time of the first sample at or after `since` that passes `check`."""
        with self._lock:
            return next((s.t for s in self.samples if s.t >= since and check(s)), None)

    def _run(self) -> None:
        base = f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{self.name}"
        pods_path = f"/api/v1/namespaces/{self.namespace}/pods"
        selector = {"labelSelector": f"app={self.name}"}
        last: dict[str, str] = {}
        with self.cluster.client(timeout=5) as http:
            while not self._done.wait(_POLL):
                t = self.now()
                try:
                    dep, pods = http.get(base), http.get(pods_path, params=selector)
                except httpx.HTTPError:
                    continue
                if dep.status_code != 200 or pods.status_code != 200:
                    continue
                replicas = int(dep.json().get("spec", {}).get("replicas") or 0)
                states = {p["metadata"]["name"]: pod_state(p) for p in pods.json()["items"]}
                with self._lock:
                    self.samples.append(Sample(t, replicas, states))
                for pod, state in states.items():
                    if last.get(pod) != state:
                        self.say(f"[{t:6.1f}s] pod {pod}: {last.get(pod, 'created')} -> {state}")
                for pod in last.keys() - states.keys():
                    self.say(f"[{t:6.1f}s] pod {pod}: gone")
                last = states


def plot(samples: list[Sample], marks: list[Mark], path: Path, title: str) -> Path:
    """Draw replicas and pod states over time, with the story's moments marked; write a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    pods = sorted({p for s in samples for p in s.pods}, key=lambda p: _first_seen(samples, p))
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        sharex=True,
        figsize=(11, 3.8 + 0.35 * max(len(pods), 1)),
        gridspec_kw={"height_ratios": [1.4, max(len(pods), 1) * 0.5 + 0.5]},
    )
    ts = [s.t for s in samples]
    top.step(ts, [s.replicas for s in samples], where="post", color="#2b59c3")
    top.set_ylabel("replicas")
    most = max([s.replicas for s in samples] + [1])
    top.set_ylim(-0.2, most + 2.2)  # headroom for the labels
    top.set_yticks(range(most + 1))
    top.set_title(title, fontsize=10)
    for row, pod in enumerate(pods):
        for state, start, end in _spans(samples, pod):
            bottom.broken_barh([(start, end - start)], (row - 0.4, 0.8), color=COLOURS[state])
    bottom.set_yticks(range(len(pods)), [p.rsplit("-", 1)[-1] for p in pods], fontsize=8)
    bottom.set_ylabel("operator pods")
    bottom.set_xlabel("seconds")
    bottom.invert_yaxis()
    bottom.legend(
        handles=[Patch(color=COLOURS[s], label=s) for s in STATES],
        loc="upper left",
        fontsize=7,
        ncol=4,
    )
    for m in marks:
        for ax in (top, bottom):
            ax.axvline(m.t, color="#888888", linewidth=0.7, linestyle="--")
    # Labels stand upright beside their lines; moments closer than half a second share one.
    groups: list[tuple[float, list[str]]] = []
    for m in marks:
        if groups and m.t - groups[-1][0] < 0.5:
            groups[-1][1].append(m.label)
        else:
            groups.append((m.t, [m.label]))
    for t, labels in groups:
        top.annotate(
            ", ".join(labels),
            (t, top.get_ylim()[1]),
            xytext=(-1, -3),
            textcoords="offset points",
            fontsize=7,
            rotation=90,
            ha="right",
            va="top",
        )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _first_seen(samples: list[Sample], pod: str) -> float:
    return next(s.t for s in samples if pod in s.pods)


def _spans(samples: list[Sample], pod: str) -> list[tuple[str, float, float]]:
    """The pod's states as (state, start, end) runs; each run ends where the next look differs."""
    spans: list[tuple[str, float, float]] = []
    open_ = False
    for s in samples:
        state = s.pods.get(pod)
        if open_:
            spans[-1] = (spans[-1][0], spans[-1][1], s.t)
        if state is None:
            open_ = False
        elif not (open_ and spans[-1][0] == state):
            spans.append((state, s.t, s.t))
            open_ = True
    return spans
