"""`make demo`'s story, run without a terminal on the session's cluster, checked by its summary.

On the real node the operator runs from its image in a container; without one (not root), on kwok
nodes as a local process. Either way it must sleep, wake on the Backup, reconcile it, sleep again.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from demo import story
from localcluster.cluster import Cluster
from testkit.steps import step

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]


def test_the_operator_sleeps_wakes_on_a_backup_reconciles_it_and_sleeps_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    with step("the demo's story runs"):
        if os.environ.get("CI") == "true":
            assert cluster.real_node is not None, cluster.real_node_absent
        summary = story.run(cluster, tmp_path, story.Options(idle_timeout=8, wakes=1), print)

    with step("it slept, woke on a Backup that was reconciled, and slept again"):
        assert summary["mode"] == ("real-node" if cluster.real_node else "kwok")
        assert "Backup.ops.example.org" in summary["annotations"]["zeroscaler.io/watched-kinds"]
        assert summary["slept"]
        (wake,) = summary["wakes"]
        assert wake["woke_on"] == (
            f"Backup backups/{wake['backup']} created: scaled from 0 to 1 replicas"
        )
        assert wake["configmap_after_wake"]
        if summary["mode"] == "real-node":
            assert wake["reconciled_by"].startswith("pod/backup-operator-")
        else:
            assert wake["reconciled_by"] == "local process (kwok stand-in)"
        assert wake["slept_again"]
        assert summary["slept_again"]

    with step("asleep it had no pod, and a new one ran after the wake"):
        # While asleep the operator had no pod at all; after the wake a new one ran.
        marks: dict[str, float] = {}
        for m in summary["marks"]:
            marks.setdefault(m.label, m.t)  # the first "asleep" is the sleep before the wake
        asleep = [s for s in summary["samples"] if marks["asleep"] <= s.t < marks["Backup 1"]]
        assert asleep
        assert all(s.replicas == 0 and not s.pods for s in asleep)
        before = {p for s in summary["samples"] if s.t < marks["asleep"] for p in s.pods}
        after = {
            p
            for s in summary["samples"]
            if s.t >= marks["woken 1"]
            for p, state in s.pods.items()
            if state == "Running"
        }
        assert after
        assert not after & before
