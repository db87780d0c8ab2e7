"""The command line the controller benchmark (`bench.bench_controller`) and its scale row
(`bench.bench_scale`) share. Either program takes both rows' arguments; when they ask for the
other's row, it hands the run over to the other program in the same process (same arguments,
same output, same exit status), so neither imports the other."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from bench.workloads import FAN_OUT


def arguments(description: str | None) -> argparse.ArgumentParser:
    """The arguments of the controller benchmark's rows and of its scale row."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting a local one")
    parser.add_argument("--workloads", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument(
        "--samples", type=int, default=200, help="wakes timed per row (the fan-out row: a quarter)"
    )
    parser.add_argument("--objects", type=int, default=50_000)
    parser.add_argument(
        "--churn",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time wakes while earlier targets fall asleep around them",
    )
    parser.add_argument(
        "--fan-out",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"also time one write that wakes {FAN_OUT} workloads",
    )
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument(
        "--idle-settle", type=float, default=60.0, help="seconds after the fill before measuring"
    )
    parser.add_argument("--gap", type=float, default=0.5, help="quiet seconds before a sample")
    parser.add_argument(
        "--idle-only",
        action="store_true",
        help="measure only the idle cost (its result file holds that alone)",
    )
    parser.add_argument(
        "--scale",
        type=int,
        nargs=2,
        metavar=("WORKLOADS", "OBJECTS"),
        help="only the scale row: 1,000 workloads over 50,000 objects, then these counts "
        "(10000 200000: about 30 minutes on 2 cores), each figure's growth between them",
    )
    parser.add_argument(
        "--scale-from",
        type=int,
        nargs=2,
        default=[1000, 50_000],
        metavar=("WORKLOADS", "OBJECTS"),
        help="the scale row's first stage, which growth is measured from",
    )
    parser.add_argument(
        "--etcd",
        default="",
        help="with --kubeconfig: its etcd's client URL, to store the scale row's objects "
        "directly (a cluster the benchmark starts is found by itself)",
    )
    parser.add_argument(
        "--scale-stages",
        type=lambda text: [tuple(int(n) for n in pair.split(":")) for pair in text.split(",")],
        help="the scale row's stages instead of --scale-from and --scale, as WORKLOADS:OBJECTS "
        "comma-separated (100:5000,1000:50000,10000:200000 for the plot against size)",
    )
    parser.add_argument(
        "--restarts",
        default="pages,streaming",
        type=lambda text: text.split(","),
        help="the scale row's restarts, in order, each how the controller lists: pages, "
        "streaming, cold (watches started by the workloads' first reconciles, not warmed), "
        "default (no flag: for code before them); the last gives the row's figures",
    )
    parser.add_argument(
        "--restart-rounds",
        type=int,
        default=3,
        help="the scale row's rounds of restarts: each lists raw once and starts every mode "
        "once, in a rotated order; each figure is the median over the rounds",
    )
    return parser


def hand_over(module: str) -> NoReturn:
    """Run `python -m module` with this program's arguments in place of this program."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]])
