"""The fault scenarios, short: each on a control plane of the module's own, which they break."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.scenarios import SCENARIOS, SHORT, Soak, own_cluster, soak
from localcluster.cluster import Cluster

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.chaos,
    # The scenarios kill the API server under the tests' own clients: a connection it dropped
    # mid-handshake is collected unclosed by the client library, which says nothing of zeroscaler.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <ssl.SSLSocket:pytest.PytestUnraisableExceptionWarning"
    ),
]


@pytest.fixture(scope="module")
def breakable() -> Iterator[Cluster]:
    """Not the session's cluster: these tests kill its API server and etcd."""
    cluster = own_cluster()
    yield cluster
    cluster.stop()
    gc.collect()


@pytest.fixture(autouse=True)
def _collected() -> Iterator[None]:
    """Dropped connections collected here, under the filter above, not later in another test."""
    yield
    gc.collect()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_promises_hold_under_faults(breakable: Cluster, tmp_path: Path, scenario: str) -> None:
    outcome = SCENARIOS[scenario](breakable, tmp_path, SHORT)
    report = outcome.report
    trace = "\n".join(["what the observer saw:", *report.trace])
    assert outcome.runs >= 1, f"{scenario} ran out of time before one run"
    assert report.violations == [], trace
    assert report.wakes_observed == report.wakes_expected, trace
    assert report.wakes_expected >= SHORT.workloads, trace


def test_promises_hold_in_a_short_soak(breakable: Cluster, tmp_path: Path) -> None:
    # `make chaos CHAOS_ARGS="--soak 1000 50 10"` at a size for the suite; at most 2 objects of a
    # type, so its activity deletes as well as creates.
    outcome, usage = soak(breakable, tmp_path, Soak(40, 8, 1.0, every=4.0, kept=2))
    report = outcome.report
    trace = "\n".join(["what the observer saw:", *report.trace])
    assert report.violations == [], trace
    assert report.wakes_observed == report.wakes_expected >= 40, trace
    assert re.search(r"and [1-9]\d* deleted", outcome.note), outcome.note
    samples = usage["samples"]
    assert isinstance(samples, list)
    assert len(samples) >= 2
