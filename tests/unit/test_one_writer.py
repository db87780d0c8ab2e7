"""The fault checker's one-writer promise, on recorded controller logs: leadership read from the
logs, writes only by the leader, no overlap, the Lease held only by our replicas."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from chaos.invariants import NothingToJudge, check_one_writer, read_leadership
from tests.unit.recorded import AT, HOLDERS, REPLICA_A, REPLICA_B, SCALING, at
from zeroscaler.controller import leader, scaling, supervisor
from zeroscaler.runtime.logs import LogfmtFormatter


def logs(tmp_path: Path, **texts: str) -> list[Path]:
    paths = []
    for name, text in texts.items():
        path = tmp_path / f"controller-{name}.log"
        path.write_text(text)
        paths.append(path)
    return paths


def test_a_failover_read_from_the_logs_is_quiet(tmp_path: Path) -> None:
    a, b = logs(tmp_path, a=REPLICA_A, b=REPLICA_B)
    leaders = read_leadership([a, b], {str(a): at(6.0)})
    assert [(x.id, x.intervals, len(x.writes)) for x in leaders] == [
        ("replica-a", [(at(0.1), at(6.0))], 2),
        ("replica-b", [(at(9.4), at(14.0))], 1),
    ]
    assert check_one_writer(leaders, HOLDERS) == []


def test_a_write_by_a_replica_not_leading_fires(tmp_path: Path) -> None:
    late = f"{AT}45.000Z {SCALING} msg=sleeping workload=ns/op-1\n"
    leaders = read_leadership(logs(tmp_path, a=REPLICA_A, b=REPLICA_B + late), {})
    assert check_one_writer(leaders, HOLDERS) == [
        f"{tmp_path}/controller-b.log: sleeping at 14:15:45.000000 while not leading"
    ]


def test_overlapping_leadership_fires(tmp_path: Path) -> None:
    # a was not killed: its leadership runs to its last line, after b began leading.
    tail = f"{AT}40.000Z level=debug logger=zeroscaler.controller.watches msg=resumed\n"
    leaders = read_leadership(logs(tmp_path, a=REPLICA_A + tail, b=REPLICA_B), {})
    assert check_one_writer(leaders, HOLDERS) == [
        f"{tmp_path}/controller-b.log led from 14:15:39.400000 while "
        f"{tmp_path}/controller-a.log led until 14:15:40.000000"
    ]


def test_a_lease_held_by_a_stranger_fires(tmp_path: Path) -> None:
    leaders = read_leadership(logs(tmp_path, a=REPLICA_A, b=REPLICA_B), {})
    held = [*HOLDERS, (at(11.0), "someone-else")]
    assert check_one_writer(leaders, held) == [
        "the Lease was held by 'someone-else' at 14:15:41.000000, no replica of ours"
    ]


def test_a_killed_process_restarted_into_the_same_log_ends_its_leadership(tmp_path: Path) -> None:
    again = REPLICA_A.replace(f"{AT}3", f"{AT}5")  # the same replica, started again at 50
    (log,) = logs(tmp_path, a=REPLICA_A + again)
    (found,) = read_leadership([log], {})
    assert found.intervals == [(at(0.1), at(5.2)), (at(20.1), at(25.2))]


def test_the_one_writer_check_refuses_nothing_to_judge(tmp_path: Path) -> None:
    leaders = read_leadership(logs(tmp_path, a=REPLICA_A), {})
    with pytest.raises(NothingToJudge, match="no controller log"):
        check_one_writer([], HOLDERS)
    with pytest.raises(NothingToJudge, match="never sampled with a holder"):
        check_one_writer(leaders, [])
    with pytest.raises(NothingToJudge, match="never sampled with a holder"):
        check_one_writer(leaders, [(at(1.0), "")])


@pytest.mark.parametrize(
    ("old", "new", "refusal"),
    [
        # The leader's logger before the package rename: no leadership read, not "none overlap".
        ("logger=zeroscaler.controller.leader", "logger=controller.leader", "became leader"),
        ("logger=zeroscaler.controller.scaling", "logger=controller.scaling", "no sleep or wake"),
    ],
)
def test_a_renamed_logger_is_refused_not_passed(
    tmp_path: Path, old: str, new: str, refusal: str
) -> None:
    leaders = read_leadership(logs(tmp_path, a=REPLICA_A.replace(old, new)), {})
    with pytest.raises(NothingToJudge, match=refusal):
        check_one_writer(leaders, HOLDERS)


def test_a_log_that_does_not_read_as_the_controllers_is_refused(tmp_path: Path) -> None:
    as_json = '{"time":"2026-12-01T14:15:30.002Z","level":"info","logger":"controller"}\n'
    with pytest.raises(NothingToJudge, match="no line reads as a controller log line"):
        read_leadership(logs(tmp_path, a=as_json), {})
    unstarted = REPLICA_A.replace("logger=controller ", "logger=service ")
    with pytest.raises(NothingToJudge, match="no 'starting' line from logger 'controller'"):
        read_leadership(logs(tmp_path, b=unstarted), {})
    nameless = REPLICA_A.replace(" id=replica-a\n", "\n", 1).replace(
        "zeroscaler-controller id=replica-a", "zeroscaler-controller"
    )
    with pytest.raises(NothingToJudge, match="names no id"):
        read_leadership(logs(tmp_path, c=nameless), {})


def test_the_controllers_own_loggers_and_format_are_what_the_checker_reads(
    tmp_path: Path,
) -> None:
    # Lines made by the controller's formatter under its modules' logger names: a rename there
    # breaks this test, not the fault scenarios' verdict.
    def line(seconds: float, logger: logging.Logger, msg: str, **extra: object) -> str:
        fields = {"name": logger.name, "msg": msg, "levelname": "INFO", "levelno": logging.INFO}
        record = logging.makeLogRecord({**fields, "created": at(seconds).timestamp(), **extra})
        return LogfmtFormatter().format(record)

    text = "\n".join(
        [
            line(0.0, supervisor.log, "starting", id="pod-0", dry_run=False, port=1),
            line(0.1, leader.log, "became leader", lease="ns/zeroscaler-controller", id="pod-0"),
            line(3.1, scaling.log, "sleeping", workload="ns/op-0", reason="idle for 3s"),
            line(4.2, scaling.log, "woken", workload="ns/op-0", reason="ConfigMap ns/x created"),
            line(5.0, leader.log, "stopped leading", lease="ns/zeroscaler-controller", id="pod-0"),
        ]
    )
    (found,) = read_leadership(logs(tmp_path, a=text), {})
    assert (found.id, found.intervals) == ("pod-0", [(at(0.1), at(5.0))])
    assert [what for _, what in found.writes] == ["sleeping", "woken"]
