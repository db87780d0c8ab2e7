"""The one-process benchmark's faked API: what it serves is what the API server would."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from bench.workloads import api_object, api_object_text


@pytest.mark.parametrize(("t", "k", "i"), [(0, 0, 0), (7, 19, 12_345), (49, 199, 39_999)])
def test_the_faked_api_writes_an_object_as_json_encodes_it(t: int, k: int, i: int) -> None:
    assert api_object_text(t, k, i) == json.dumps(api_object(t, k, i), separators=(",", ":"))


async def test_each_namespace_lists_what_the_whole_type_holds_there() -> None:
    from bench.one_process import LoadedAPI
    from bench.workloads import GROUP, kind_of

    api = LoadedAPI(1_000, 20_000)  # 400 objects a type over 20 namespaces
    plural = kind_of(3)[1]

    async def names(path: str) -> list[tuple[str, str]]:
        resp = await api(httpx.Request("GET", f"https://127.0.0.1:1{path}"))
        items = json.loads(resp.content)["items"]
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items]

    whole = await names(f"/apis/{GROUP}/v1/{plural}")
    spaced = [await names(f"/apis/{GROUP}/v1/namespaces/zs-bench-{k}/{plural}") for k in range(20)]
    assert len(whole) == 400
    assert sorted(o for found in spaced for o in found) == sorted(whole)
    assert all(ns == f"zs-bench-{k}" for k, found in enumerate(spaced) for ns, _ in found)


def _size(workloads: int, objects: int, cpu: float, resident_mb: float) -> Any:
    from bench.measures import Size

    return Size(workloads, objects, resident_mb, resident_mb, cpu * 2, cpu)


def test_a_series_steps_are_what_each_added_unit_cost() -> None:
    from bench.one_process import Step, steps

    series = [_size(1_000, 200_000, 3.0, 100.0), _size(3_000, 200_000, 5.0, 104.0)]
    assert steps(series, "workloads") == [Step(1_000, 3_000, 0.001, 4 * 2**20 / 2_000)]
    with pytest.raises(ValueError, match="objects must grow from size to size, not \\+0"):
        steps(series, "objects")
    with pytest.raises(ValueError, match="dimension: 'pods'; 'workloads' or 'objects'"):
        steps(series, "pods")


def _failed(targets: list[Any]) -> list[str]:
    return [t.what for t in targets if not t.met]


def test_growth_is_judged_by_the_last_step_against_the_first_in_each_dimension() -> None:
    from bench.one_process import growth_targets

    linear = {
        "workloads": [_size(w, 200_000, 2.0 + w * 0.0005, 60.0 + w * 0.003) for w in (2, 8, 32)],
        "objects": [_size(10_000, o, 5.0 + o * 1e-5, 50.0 + o * 2e-4) for o in (5, 20, 80)],
    }
    assert _failed(growth_targets(linear, 1.25)) == []
    # The objects' last step costs 1.5 times the first's in CPU: growth faster than linear.
    faster = dict(linear)
    faster["objects"] = [
        _size(10_000, 50_000, 5.5, 60.0),
        _size(10_000, 200_000, 7.0, 90.0),  # 10 µs an object
        _size(10_000, 800_000, 16.0, 210.0),  # 15 µs an object; resident as before
    ]
    assert _failed(growth_targets(faster, 1.25)) == [
        "objects: CPU per object added, last step / first"
    ]


def test_growth_with_fewer_than_three_sizes_judges_nothing_and_fails() -> None:
    from bench.one_process import growth_targets

    short = {"workloads": [_size(1_000, 20_000, 1.0, 50.0), _size(2_000, 20_000, 2.0, 60.0)]}
    assert _failed(growth_targets(short, 1.25)) == [
        "workloads: CPU per workload added, last step / first",
        "workloads: resident per workload added, last step / first",
    ]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workloads", "1000,2000"], "at least three counts"),
        (["--workloads", "4000,2000,8000"], "growing"),
        (["--objects", "10k,20k,40k"], "counts separated by commas"),
        (["--objects", "10,20,40"], "the first at least 50"),
        (["100"], "two positive counts, workloads and objects"),
    ],
)
def test_the_benchmark_refuses_sizes_it_cannot_judge_by_name(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.one_process import main

    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    assert says in capsys.readouterr().err


def test_make_bench_names_the_growth_run_for_what_it_runs() -> None:
    from bench.__main__ import BENCHMARKS, name_of

    assert "bench.one_process" in BENCHMARKS
    assert name_of("bench.one_process") == "growth"
    assert name_of("bench.bench_memory") == "memory"


def test_many_operators_judges_the_100000_against_its_baseline_run_on_both_sides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.one_process as one_process
    from bench.measures import one_process_targets

    runs = iter(
        [
            {"one_process_10000_peak_bytes": 190.0 * 2**20, "one_process_10000_cpu_seconds": 7.0},
            {
                "one_process_100000_peak_bytes": 900.0 * 2**20,
                "one_process_100000_cpu_seconds": 80.0,
            },
            {"one_process_10000_peak_bytes": 200.0 * 2**20, "one_process_10000_cpu_seconds": 9.0},
        ]
    )
    monkeypatch.setattr(one_process, "one_process_sizes", lambda sizes: next(runs))
    results = one_process.many_operators()
    assert results["one_process_10000_cpu_seconds"] == 8.0  # the mean of 7 and 9
    assert results["one_process_10000_peak_bytes"] == 200.0 * 2**20  # the larger
    assert (
        results["before_one_process_10000_cpu_seconds"],
        results["after_one_process_10000_cpu_seconds"],
    ) == (7.0, 9.0)
    judged = {t.what: t for t in one_process_targets(results)}
    assert (
        judged["one process at 100,000 workloads: start CPU per workload / at 10,000"].value == 1.0
    )
    # Time was not measured in these runs: a figure missing fails, never passes.
    assert not judged["one process at 100,000 workloads: start time per workload / at 10,000"].met


def test_growth_runs_each_size_in_rounds_and_judges_its_medians(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.one_process as one_process
    from bench.measures import Size

    order: list[tuple[int, int]] = []
    cpu = iter([6.0, 9.0, 30.0, 6.5, 10.0, 2.0, 7.0, 11.0, 31.0])  # one run of the three noisy

    def measure(workloads: int, objects: int) -> Size:
        order.append((workloads, objects))
        return Size(workloads, objects, 100.0, 120.0, 5.0, next(cpu))

    monkeypatch.setattr(one_process, "measure_one_process", measure)
    series, runs = one_process.growth([10, 20], [100, 200], (10, 100), repeats=3)
    sizes = [(10, 100), (10, 200), (20, 100)]
    assert order == sizes + sizes[::-1] + sizes  # rounds, every other one backwards
    assert len(runs) == 9
    # (10, 100): 6.0, 2.0, 7.0; (10, 200): 9.0, 10.0, 11.0; (20, 100): 30.0, 6.5, 31.0
    assert [s.cpu_seconds for s in series["objects"]] == [6.0, 10.0]
    assert [s.cpu_seconds for s in series["workloads"]] == [6.0, 30.0]
