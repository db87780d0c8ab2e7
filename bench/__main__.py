"""`make bench`: every benchmark in turn, each bounded in time and requests; tables and plots."""

from __future__ import annotations

import subprocess
import sys
import time

BENCHMARKS = (
    "bench.bench_cluster",
    "bench.bench_webhook",
    "bench.bench_activator",
    "bench.bench_endpoints",
    "bench.bench_starvation",
    "bench.bench_controller",
    "bench.bench_masswake",
    "bench.bench_maxsleep",
    "bench.bench_scale",
    "bench.bench_memory",
    "bench.one_process",  # growth in workloads and in objects; `python -m bench growth`
    "bench.bench_chart",
    "bench.bench_metrics",
)


NAMES = {"bench.one_process": "growth"}  # named for what it runs, not for its module


def name_of(module: str) -> str:
    return NAMES.get(module, module.rsplit("_", 1)[1])


def main() -> int:
    chosen = [b for b in BENCHMARKS if not sys.argv[1:] or name_of(b) in sys.argv[1:]]
    failed = []
    for i, module in enumerate(chosen, 1):
        print(f"\n[bench {i}/{len(chosen)}] {module}", flush=True)
        began = time.monotonic()
        code = subprocess.call([sys.executable, "-m", module])
        print(
            f"[bench {i}/{len(chosen)}] {module}: exit {code} after "
            f"{time.monotonic() - began:.0f}s",
            flush=True,
        )
        if code:
            failed.append(module)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
