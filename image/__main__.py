"""`python -m image build | lock | rootfs DIR`: zeroscaler's image, made without a Docker engine."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from image import build, debian, python, release, static
from image.platform import AMD64, PLATFORMS

_cache = debian.cache_dir


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
    rel = sub.add_parser("release", help="the image index, chart, manifest, SBOM and sums")
    rel.add_argument("--version", default=build.version(), help="default: pyproject's version")
    rel.add_argument("--out", type=Path, default=build.REPO / "dist" / "release")
    pu = sub.add_parser("push", help="push a release's image index and chart to an OCI registry")
    pu.add_argument("--registry", required=True, help="host[:port]/path, e.g. ghcr.io/zeroscaler")
    pu.add_argument("--release", type=Path, default=build.REPO / "dist" / "release")
    pu.add_argument(
        "--plain-http", action="store_true", help="the registry speaks HTTP (loopback tests)"
    )
    lk = sub.add_parser("lock", help="pin the current Debian package versions and Python wheels")
    for p in (b, r, lk):
        p.add_argument(
            "--image",
            choices=sorted(build.SPECS) if p is not b else sorted(build.SPECS | static.SPECS),
            default="zeroscaler",
            help="which image: zeroscaler, or an example operator (the demo's, the Go one)",
        )
    for p in (b, r):
        p.add_argument(
            "--platform",
            choices=sorted(PLATFORMS),
            default=next((p.debian for p in PLATFORMS.values() if p.native), AMD64.debian),
            help="the architecture to build for (default this machine's; a foreign one runs "
            "under qemu)",
        )
    args = parser.parse_args(argv)
    if args.command == "build" and args.image in static.SPECS:
        return _static(static.SPECS[args.image], args)
    spec = build.SPECS[getattr(args, "image", "zeroscaler")]

    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[image {time.monotonic() - started:5.1f}s] {message}", file=sys.stderr, flush=True)

    try:
        if args.command in ("release", "push"):
            return _release(args, say)
        if args.command == "lock":
            if spec is build.ZEROSCALER:  # the Debian base is shared; zeroscaler's lock moves it
                for platform in spec.platforms:
                    packages = debian.resolve(platform=platform)
                    debian.write_lock(packages, debian.lock_path(platform))
                    say(f"pinned {len(packages)} Debian packages in {debian.lock_path(platform)}")
                native = next(p for p in PLATFORMS.values() if p.native)
                tool = debian.resolve((debian.EMULATOR_PACKAGE,), native)
                debian.write_lock(
                    tool, debian.EMULATOR_LOCK, "the build runs foreign binaries with"
                )
                say(f"pinned {debian.EMULATOR_PACKAGE} in {debian.EMULATOR_LOCK.name}")
            for platform in spec.platforms:
                path = spec.lock_for(platform)
                if spec.requirements is None:
                    count = python.lock(python.project_requirements(), path, platform=platform)
                else:
                    source = f"requirements in {spec.requirements.name} beside it"
                    wanted = python.file_requirements(spec.requirements)
                    count = python.lock(wanted, path, source, platform)
                say(f"pinned {count} Python packages in {path.name}")
            return 0
        platform = PLATFORMS[args.platform]
        if args.command == "rootfs":
            build.assemble(args.dir, _cache(), say, spec, platform)
            say(f"root filesystem in {args.dir}")
            return 0
        # A scratch tree per build: builds from two checkouts at once must not share one.
        _cache().mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=f"rootfs-{args.image}-", dir=_cache()))
        try:
            build.assemble(root, _cache(), say, spec, platform)
            names = args.name or [spec.name()]
            suffix = "" if platform == AMD64 else f"-{platform.debian}"
            out = args.out or build.REPO / "dist" / f"{args.image}-image{suffix}.tar"
            result = build.pack(root, out, names, say, spec, platform)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    except (debian.PackageError, python.LockError, build.BuildError, release.ReleaseError) as e:
        say(f"failed: {e}")
        return 1
    compressed = sum(layer.size for layer in result.layers)
    seconds = time.monotonic() - started
    say(
        f"wrote {result.archive} ({', '.join(result.names)}): {result.unpacked_bytes / 1e6:.1f} MB "
        f"unpacked, {compressed / 1e6:.1f} MB compressed, digest {result.digest}"
    )
    _record(out, result, seconds)
    print(result.archive)
    return 0


def _record(out: Path, result: build.Result, seconds: float) -> None:
    """Beside the archive, what the build took and made, for `python -m bench chart` to report."""
    compressed = sum(layer.size for layer in result.layers)
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


def _static(spec: static.StaticSpec, args: argparse.Namespace) -> int:
    """An image of one static binary, built from its pinned sources (no Debian, no wheels)."""
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[image {time.monotonic() - started:5.1f}s] {message}", file=sys.stderr, flush=True)

    if args.platform != AMD64.debian:
        say(f"failed: {spec.title} is built for {AMD64.debian} only")
        return 1
    out = args.out or build.REPO / "dist" / f"{spec.repository}-image.tar"
    from localcluster.build import BuildError  # the Go build is the local cluster's

    try:
        result = static.pack(spec, out, args.name or [spec.name()], say)
    except BuildError as e:
        say(f"failed: {e}")
        return 1
    compressed = sum(layer.size for layer in result.layers)
    say(
        f"wrote {result.archive} ({', '.join(result.names)}): {result.unpacked_bytes / 1e6:.1f} MB "
        f"unpacked, {compressed / 1e6:.1f} MB compressed, digest {result.digest}"
    )
    _record(out, result, time.monotonic() - started)
    print(result.archive)
    return 0


def _release(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    # The tools are the local cluster's: helm (3) and crane, each cached in its own directory.
    from localcluster import build as tools

    found = {"helm": tools.ensure_helm(progress=say)}
    if args.command == "release":
        started = time.monotonic()
        record = release.make(args.version, args.out, found, say)
        say(f"release {args.version} in {args.out} in {time.monotonic() - started:.0f}s")
        for platform, image in record["images"].items():
            say(
                f"  {platform}: {image['compressed_bytes'] / 1e6:.1f} MB compressed, "
                f"{image['unpacked_bytes'] / 1e6:.1f} MB unpacked, {image['digest']}"
            )
        print(args.out)
        return 0
    found = {**found, **tools.ensure_release_tools(progress=say)}
    started = time.monotonic()
    pushed = release.push(args.release, args.registry, found, say, plain_http=args.plain_http)
    say(f"pushed in {time.monotonic() - started:.1f}s")
    print(json.dumps(pushed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
