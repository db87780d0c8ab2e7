"""The fault scenarios, short: each on a control plane of the module's own, which they break."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.cluster import Cluster
from tests.support.chaos import SCENARIOS, SHORT, own_cluster

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.chaos,
    # The scenarios kill the API server under the tests' own clients: a connection it dropped
    # mid-handshake is collected unclosed by the client library, which says nothing of zeroscaler.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <ssl.SSLSocket:pytest.PytestUnraisableExceptionWarning"
    ),
]
WAKELESS = {"writers"}  # its activity is random: it may make none while a workload sleeps


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
    if scenario not in WAKELESS:
        assert report.wakes_expected >= SHORT.workloads, trace
