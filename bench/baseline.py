"""The baseline for wake latency: one raw watch that scales a Deployment up on every event."""

from __future__ import annotations

import argparse
import asyncio

from zeroscaler.access import load_access
from zeroscaler.kube import Kube


async def run(kubeconfig: str, watch_path: str, scale_path: str) -> None:
    """List, then watch `watch_path`; on every change, set `scale_path` to one replica."""
    async with Kube(load_access(kubeconfig)) as kube:
        _, rv = await kube.list_all(watch_path, metadata_only=True)
        print("ready", flush=True)
        while True:
            async for event in kube.watch(watch_path, resource_version=rv, metadata_only=True):
                rv = str(event["object"]["metadata"].get("resourceVersion", rv))
                if event["type"] == "BOOKMARK":
                    continue
                await kube.patch(scale_path, {"spec": {"replicas": 1}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--watch", required=True, help="collection path to watch")
    parser.add_argument("--scale", required=True, help="scale subresource path to patch")
    args = parser.parse_args()
    asyncio.run(run(args.kubeconfig, args.watch, args.scale))


if __name__ == "__main__":
    main()
