"""`python -m image build | lock | rootfs DIR`: zeroscaler's image, made without a Docker engine."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from image import build, debian, python


def _cache() -> Path:
    if env := os.environ.get("ZEROSCALER_CACHE"):
        return Path(env) / "image"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zeroscaler" / "image"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m image", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the image archive (docker load, ctr import, kind load)")
    b.add_argument("--out", type=Path, help="default: dist/IMAGE-image.tar")
    b.add_argument(
        "--name",
        action="append",
        help="image reference to load it as (repeatable; default docker.io/library/IMAGE:VERSION)",
    )
    r = sub.add_parser("rootfs", help="only assemble the root filesystem (the Dockerfile's step)")
    r.add_argument("dir", type=Path)
    lk = sub.add_parser("lock", help="pin the current Debian package versions and Python wheels")
    for p in (b, r, lk):
        p.add_argument(
            "--image",
            choices=sorted(build.SPECS),
            default="zeroscaler",
            help="which image: zeroscaler, or the example operator of the demo",
        )
    args = parser.parse_args(argv)
    spec = build.SPECS[args.image]

    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[image {time.monotonic() - started:5.1f}s] {message}", file=sys.stderr, flush=True)

    try:
        if args.command == "lock":
            if spec is build.ZEROSCALER:  # the Debian base is shared; zeroscaler's lock moves it
                packages = debian.resolve()
                debian.write_lock(packages)
                say(f"pinned {len(packages)} Debian packages in {debian.LOCK.name}")
            if spec.requirements is None:
                count = python.lock(python.project_requirements(), spec.lock)
            else:
                source = f"requirements in {spec.requirements.name} beside it"
                count = python.lock(python.file_requirements(spec.requirements), spec.lock, source)
            say(f"pinned {count} Python packages in {spec.lock.name}")
            return 0
        if args.command == "rootfs":
            build.assemble(args.dir, _cache(), say, spec)
            say(f"root filesystem in {args.dir}")
            return 0
        # A scratch tree per build: builds from two checkouts at once must not share one.
        _cache().mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=f"rootfs-{args.image}-", dir=_cache()))
        try:
            build.assemble(root, _cache(), say, spec)
            names = args.name or [spec.name()]
            out = args.out or build.REPO / "dist" / f"{args.image}-image.tar"
            result = build.pack(root, out, names, say, spec)
        finally:
            shutil.rmtree(root, ignore_errors=True)
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
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    print(result.archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
