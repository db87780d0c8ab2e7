"""Named steps: a system test reads as a story (kube-green's `Assess("sleep")` and
`Assess("wake up")`), and its log and its failures say which step it was in.

    with step("sleeps"):
        wait_asleep(api, ref, 3)
    with step("wakes on a ConfigMap created"):
        ...

A step adds nothing to what the test checks: it writes one line when it begins, and a failure
inside it (an assertion, a `wait_for` that timed out, an API error) is raised as it was, with a
note naming the step, which pytest prints under the error.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime


@contextmanager
def step(name: str) -> Iterator[None]:
    """Run the block as the step `name`: logged when it begins, named in any failure inside it."""
    print(f"[step {datetime.now(UTC):%H:%M:%S.%f}] {name}", file=sys.stderr, flush=True)
    try:
        yield
    except BaseException as failure:
        failure.add_note(f"in step: {name}")
        raise
