"""How fast this machine is right now, for a benchmark's figures to be read against.

Runs on one machine hours apart disagree with the same code: the scale row's raw list took
3.8-4.2 s in one run and 4.6-5.9 s four hours later, and the ratios it judges moved with it
(`docs/figures.md`, runs J and K). A fixed piece of the work a restart is made of, timed beside
each stage, says how much of a change is the machine's: it decodes a list page of 500 objects
shaped as the scale row's (the client's largest cost in a restart) and hashes each object's name,
with the standard library only, so that no change to zeroscaler moves it. `python -m
bench.calibration` prints the median CPU milliseconds of a round, in a process of its own.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from typing import Any

OBJECTS = 500  # one page of a paginated list, as the controller asks for them
DECODES = 30  # pages decoded a round: about 50 ms of CPU on this machine
ROUNDS = 15
_VERSION = "bench.zeroscaler.example.com/v1"


def page(objects: int = OBJECTS) -> bytes:
    """A list page as the API server writes it for the scale row's custom objects."""
    items: list[dict[str, Any]] = []
    for i in range(objects):
        metadata = {
            "name": f"obj-{i:06d}",
            "namespace": f"zs-bench-{i % 200}",
            "uid": f"{i:08x}-4d2c-4b7a-9a61-{i:012x}",
            "resourceVersion": str(100_000 + i),
            "generation": 1,
            "creationTimestamp": "2026-12-05T09:00:00Z",
            "managedFields": [
                {
                    "manager": "bench",
                    "operation": "Update",
                    "apiVersion": _VERSION,
                    "time": "2026-12-05T09:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {".": {}, "f:value": {}}},
                }
            ],
        }
        items.append({"apiVersion": _VERSION, "kind": "Thing0", "metadata": metadata,
                      "spec": {"value": i}})  # fmt: skip
    listed = {"resourceVersion": "200000", "continue": "x" * 120}
    body = {"apiVersion": _VERSION, "kind": "Thing0List", "metadata": listed, "items": items}
    return json.dumps(body, separators=(",", ":")).encode()


def round_ms(text: bytes, decodes: int = DECODES) -> float:
    """CPU milliseconds to decode `text` `decodes` times and hash every object's name."""
    began = time.process_time()
    for _ in range(decodes):
        for item in json.loads(text)["items"]:
            hashlib.blake2b(item["metadata"]["name"].encode(), digest_size=8).digest()
    return (time.process_time() - began) * 1000


def calibrate(rounds: int = ROUNDS) -> float:
    """The median of `rounds` rounds, in CPU milliseconds (lower: a faster machine)."""
    if rounds < 1:
        raise ValueError(f"rounds: {rounds}; at least 1")
    text = page()
    round_ms(text, 1)  # warm the allocator and the caches before what counts
    return statistics.median(round_ms(text) for _ in range(rounds))


def main() -> None:
    print(f"calibration {calibrate():.2f} ms")


if __name__ == "__main__":
    main()
