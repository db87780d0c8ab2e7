"""Where the benchmarks keep their results: bench/results/NAME.json (and their plots beside)."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def save_json(name: str, data: object) -> Path:
    """Write `data` as results/NAME.json; the path it went to."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
