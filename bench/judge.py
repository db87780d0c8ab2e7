"""How a benchmark judges what it measured: targets with their verdicts, failures counted at their
limit, alternating orders, and the stamp a result file carries so a figure can be traced to its run.

A benchmark states its targets as `Target`s, prints `verdicts`, writes them into its result file
(`stamped`) and exits with `exit_code`: non-zero when a target is missed (saying by how much) or
when there is nothing to judge (no sample, a figure not measured). A figure without a target is a
`Target` with no limit: it is printed and written as a measurement, and still fails when missing.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    """One figure and what it must not exceed (`limit`), or, with `at_least`, fall below.

    `value` None (or NaN) means it was not measured: a failure, never a pass. With `limit`
    None the figure is a measurement without a target: it is reported, and judged only for
    being there.
    """

    what: str
    value: float | None
    limit: float | None = None
    unit: str = ""
    at_least: bool = False

    @property
    def measured(self) -> bool:
        return self.value is not None and not math.isnan(self.value)

    @property
    def met(self) -> bool:
        if not self.measured:
            return False
        if self.limit is None:
            return True
        assert self.value is not None
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    def missed_by(self) -> float:
        """How far the value is on the wrong side of its limit (0 when met or no target)."""
        if not self.measured or self.limit is None or self.met:
            return 0.0
        assert self.value is not None
        return abs(self.value - self.limit)

    def verdict(self) -> str:
        bound = "at least" if self.at_least else "at most"
        if not self.measured:
            return f"{self.what}: not measured, nothing to judge"
        shown = _figure(self.value, self.unit)
        if self.limit is None:
            return f"{self.what}: {shown} (a measurement; no target)"
        target = f"{bound} {_figure(self.limit, self.unit)}"
        if self.met:
            return f"{self.what}: {shown}, target {target}: met"
        share = self.missed_by() / abs(self.limit) if self.limit else math.inf
        by = f"{_figure(self.missed_by(), self.unit)} ({share:.0%} of the target)"
        return f"{self.what}: {shown}, target {target}: MISSED by {by}"

    def record(self) -> dict[str, Any]:
        """The target as a result file keeps it."""
        return {
            "what": self.what,
            "value": self.value if self.measured else None,
            "limit": self.limit,
            "unit": self.unit,
            "bound": "at least" if self.at_least else "at most",
            "met": self.met,
            "missed_by": self.missed_by(),
        }


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    digits = 2 if abs(value) < 100 else 0
    spaced = "" if unit in ("x", "%", "") else " "
    return f"{value:,.{digits}f}{spaced}{unit}"


def problems(targets: Sequence[Target]) -> list[str]:
    """What fails the run: targets missed and figures not measured; nothing at all fails too."""
    if not targets:
        return ["no figure was measured: nothing to judge"]
    return [t.verdict() for t in targets if not t.met]


def report(targets: Sequence[Target], out: Any = None) -> list[str]:
    """Print every verdict, then the failures again as one summary; return the failures."""
    stream = out or sys.stdout
    print("\nverdicts", file=stream)
    for target in targets:
        print(f"  {target.verdict()}", file=stream)
    found = problems(targets)
    bounded = sum(1 for t in targets if t.limit is not None)
    counted = f"{bounded} with a target, {len(targets) - bounded} measurements without one"
    if found:
        print(f"\nFAILED: {len(found)} of {len(targets)} figures ({counted}):", file=stream)
        for problem in found:
            print(f"  {problem}", file=stream)
    else:
        print(f"\npassed: every figure measured ({counted}), every target met", file=stream)
    return found


def exit_code(targets: Sequence[Target]) -> int:
    return 1 if problems(targets) else 0


def with_failures(values: Iterable[float], failures: int, limit: float) -> list[float]:
    """Samples with each failed request counted as one that took the whole `limit`: a failure
    is the slowest answer, not one left out of the percentiles."""
    if failures < 0:
        raise ValueError(f"failures: {failures}; at least 0")
    return [*values, *([limit] * failures)]


def alternated(subjects: Sequence[T], rounds: int) -> list[list[T]]:
    """Each round's order: the subjects forward, then backward in the next round, so that none
    always comes first (after the quiet of a stopped process, or on a machine whose load drifts);
    over an even number of rounds each place is held equally often."""
    if rounds < 1:
        raise ValueError(f"rounds: {rounds}; at least 1")
    forward = list(subjects)
    return [forward if r % 2 == 0 else forward[::-1] for r in range(rounds)]


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{'+changes' if dirty else ''}"


def stamp(began: float, load_before: Sequence[float]) -> dict[str, Any]:
    """What a result file says of its run: the command, the code, when, and the machine's load."""
    return {
        "command": " ".join(["python", "-m", _module(), *sys.argv[1:]]),
        "commit": _commit(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began)),
        "seconds": round(time.time() - began, 1),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def _module() -> str:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec.name if spec is not None else Path(sys.argv[0]).stem


class Run:
    """One benchmark run: when it began and the load then, for its result file's stamp."""

    def __init__(self) -> None:
        self.began = time.time()
        self.load_before = os.getloadavg()

    def stamped(self, data: dict[str, Any], targets: Sequence[Target]) -> dict[str, Any]:
        """`data` with the run's stamp and every verdict, as its result file holds them."""
        return {
            "run": stamp(self.began, self.load_before),
            "verdicts": [t.record() for t in targets],
            "failed": problems(targets),
            **data,
        }
