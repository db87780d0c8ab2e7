"""The raw baselines: one watch that scales Deployments up on every event (for wake latency), or
plain paginated lists of some collections, all at once, then exit (for a restart's lists)."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from zeroscaler.api import ClientLimits, Gone, Kube, KubeError
from zeroscaler.api.credentials import load_access


async def run(kubeconfig: str, watch_path: str, scale_paths: list[str], connections: int) -> None:
    """List, then watch `watch_path`; on every change, set each of `scale_paths` to one replica."""
    async with Kube(load_access(kubeconfig), ClientLimits(max_connections=connections)) as kube:
        _, rv = await kube.list_all(watch_path, metadata_only=True)
        print("ready", flush=True)
        while True:
            try:
                async for event in kube.watch(watch_path, resource_version=rv, metadata_only=True):
                    rv = str(event["object"]["metadata"].get("resourceVersion", rv))
                    if event["type"] == "BOOKMARK":
                        continue
                    # All at once: the connection pool alone bounds how many are in flight.
                    body = {"spec": {"replicas": 1}}
                    await asyncio.gather(*(kube.patch(p, body) for p in scale_paths))
            except Gone:
                _, rv = await kube.list_all(watch_path, metadata_only=True)
            except KubeError as e:  # as any watcher would: again, a moment later
                print(f"watch failed, again: {e}", flush=True)
                await asyncio.sleep(0.2)


async def list_once(kubeconfig: str, paths: list[str], full: list[str], connections: int) -> None:
    """List every one of `paths` (metadata only) and `full` at once, in pages, as the controller's
    watches list on a start; print how many objects came, how long the lists took and the CPU
    the process took."""
    began = time.monotonic()
    async with Kube(load_access(kubeconfig), ClientLimits(max_connections=connections)) as kube:
        lists = await asyncio.gather(
            *(kube.list_all(p, metadata_only=True) for p in paths),
            *(kube.list_all(p) for p in full),
        )
    count = sum(len(items) for items, _ in lists)
    # Its own CPU from its start, imports too, as a controller's is counted from its spawn.
    print(f"listed {count} {time.monotonic() - began:.3f} {time.process_time():.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--watch", help="collection path to watch")
    parser.add_argument(
        "--list", action="append", default=[], help="collection path to list once, metadata only"
    )
    parser.add_argument("--list-full", action="append", default=[], help="the same, whole objects")
    parser.add_argument(
        "--list-file", type=Path, help="a file of paths to list, metadata only, one a line"
    )
    parser.add_argument("--scale", action="append", default=[], help="scale subresource path")
    parser.add_argument("--scale-file", type=Path, help="a file of scale paths, one a line")
    parser.add_argument("--connections", type=int, default=64, help="the client's connection pool")
    args = parser.parse_args()
    if args.list_file:
        args.list += [line for line in args.list_file.read_text().splitlines() if line]
    if args.list or args.list_full:
        asyncio.run(list_once(args.kubeconfig, args.list, args.list_full, args.connections))
        return
    if not args.watch:
        parser.error("--watch or --list is needed")
    paths = list(args.scale)
    if args.scale_file:
        paths += [line for line in args.scale_file.read_text().splitlines() if line]
    asyncio.run(run(args.kubeconfig, args.watch, paths, args.connections))


if __name__ == "__main__":
    main()
