"""Every part of the product takes its time from the clock it is given: only the clock module
reads the wall clock or monotonic time, and the few named exceptions below say why in their code."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("zeroscaler", "controller", "webhook", "certs")
READS = re.compile(
    r"datetime\.(now|utcnow|today)\(|time\.(time|monotonic|perf_counter)(_ns)?\("
    r"|loop\.time\(|get_running_loop\(\)\.time\("
)
# Each keeps its own reading, with the reason beside it in the code.
EXCEPTIONS = {
    "zeroscaler/runtime/clock.py",  # the real clock itself
    "zeroscaler/api/transport.py",  # pacing: the loop's own sleeps
    "zeroscaler/api/credentials.py",  # the token file, rotated by the OS's clock
    "zeroscaler/cli/session.py",  # a person's command, without the server's time
    "zeroscaler/cli/workload_view.py",  # shown to a person
    "certs/issue.py",  # validity that peers check by their OS clocks, unless told
}


def product_modules() -> list[str]:
    found = set()
    for folder in FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            relative = path.relative_to(REPO).as_posix()
            if not relative.startswith(
                ("zeroscaler/controller/", "zeroscaler/webhook/", "zeroscaler/certs/")
            ):
                found.add(relative)
    return sorted(found)


def test_no_part_of_the_product_reads_the_time_but_from_the_clock_it_is_given() -> None:
    reading = [m for m in product_modules() if READS.search((REPO / m).read_text())]
    assert sorted(set(reading) - EXCEPTIONS) == []


def test_each_exception_still_reads_the_time_itself() -> None:
    reading = {m for m in product_modules() if READS.search((REPO / m).read_text())}
    assert sorted(EXCEPTIONS - reading) == []
