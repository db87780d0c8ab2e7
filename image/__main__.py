"""`python -m image build | lock | rootfs DIR`: zeroscaler's image, made without a Docker engine."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from image import build, debian, python

DEFAULT_OUT = build.REPO / "dist" / "zeroscaler-image.tar"


def _cache() -> Path:
    if env := os.environ.get("ZEROSCALER_CACHE"):
        return Path(env) / "image"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zeroscaler" / "image"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m image", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the image archive (docker load, ctr import, kind load)")
    b.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    b.add_argument(
        "--name",
        action="append",
        help=f"image reference to load it as (repeatable; default {build.default_name()})",
    )
    r = sub.add_parser("rootfs", help="only assemble the root filesystem (the Dockerfile's step)")
    r.add_argument("dir", type=Path)
    sub.add_parser("lock", help="pin the current Debian package versions and Python wheels")
    args = parser.parse_args(argv)

    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[image {time.monotonic() - started:5.1f}s] {message}", file=sys.stderr, flush=True)

    try:
        if args.command == "lock":
            packages = debian.resolve()
            debian.write_lock(packages)
            say(f"pinned {len(packages)} Debian packages in {debian.LOCK.name}")
            count = python.lock(python.project_requirements())
            say(f"pinned {count} Python packages in {python.LOCK.name}")
            return 0
        if args.command == "rootfs":
            build.assemble(args.dir, _cache(), say)
            say(f"root filesystem in {args.dir}")
            return 0
        root = _cache() / "rootfs"
        build.assemble(root, _cache(), say)
        names = args.name or [build.default_name()]
        result = build.pack(root, args.out, names, say)
    except (debian.PackageError, python.LockError, build.BuildError) as e:
        say(f"failed: {e}")
        return 1
    compressed = sum(layer.size for layer in result.layers)
    seconds = time.monotonic() - started
    say(
        f"wrote {result.archive} ({', '.join(result.names)}): {result.unpacked_bytes / 1e6:.1f} MB "
        f"unpacked, {compressed / 1e6:.1f} MB compressed, digest {result.digest}"
    )
    # Beside the archive, what the build took and made, for `python -m bench chart` to report.
    record = {
        "seconds": round(seconds, 1),
        "digest": result.digest,
        "names": result.names,
        "unpacked_bytes": result.unpacked_bytes,
        "compressed_bytes": compressed,
        "layers": [
            {"comment": layer.comment, "compressed_bytes": layer.size} for layer in result.layers
        ],
    }
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    print(result.archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
