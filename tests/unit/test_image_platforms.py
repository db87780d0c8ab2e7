"""The image for two architectures: per-platform locks that agree, and an index that validates."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from image import build, debian, python
from image.platform import AMD64, ARM64, PLATFORMS
from oci import archive

FILES = [archive.Entry("/bin", 0o755, "dir"), archive.Entry("/bin/tool", 0o755, data=b"x")]


def _image(arch: str, variant: str = "", data: bytes = b"x") -> archive.Image:
    layer = archive.make_layer([FILES[0], archive.Entry("/bin/tool", 0o755, data=data)], arch)
    return archive.Image([layer], ["registry.example/zs:1.2.3"], architecture=arch, variant=variant)


def test_platform_names() -> None:
    assert (AMD64.oci, ARM64.oci) == ("linux/amd64", "linux/arm64/v8")
    assert ARM64.triplet == "aarch64-linux-gnu"
    assert sum(p.native for p in PLATFORMS.values()) <= 1


def test_wheel_tags_are_the_platforms_own_and_glibc_236_at_most() -> None:
    amd64, arm64 = python.wheel_platforms(AMD64), python.wheel_platforms(ARM64)
    assert amd64[0] == "manylinux_2_36_x86_64"
    assert "manylinux1_x86_64" in amd64
    assert arm64[0] == "manylinux_2_36_aarch64"
    assert "manylinux2014_aarch64" in arm64
    assert all(tag.endswith("_aarch64") for tag in arm64)


def test_every_architecture_pins_the_same_versions() -> None:
    """A stale lock of one architecture (deps changed, one re-locked) fails here."""
    spec = build.ZEROSCALER
    wheels = {p: python.locked(spec.lock_for(p)) for p in spec.platforms}
    versions = [{name: pin[0] for name, pin in pins.items()} for pins in wheels.values()]
    assert all(v == versions[0] for v in versions), "run `python -m image lock`"
    hashes = [{h for _, hs in pins.values() for h in hs} for pins in wheels.values()]
    assert all(len(h) >= len(versions[0]) for h in hashes)
    # Wheels with compiled parts differ by platform; pure ones are the same file.
    assert hashes[0] != hashes[1]
    assert hashes[0] & hashes[1]
    debs = {p: debian.load_lock(debian.lock_path(p)) for p in spec.platforms}
    for platform, packages in debs.items():
        assert {p.architecture for p in packages} <= {platform.debian, "all"}
        assert all(len(p.sha256) == 64 for p in packages)
    names = [{(p.name, p.version) for p in packages} for packages in debs.values()]
    assert names[0] == names[1]


def test_lock_paths_come_from_one_place() -> None:
    assert python.lock_path(python.LOCK, AMD64) == python.LOCK
    assert python.lock_path(python.LOCK, ARM64).name == "requirements-arm64.lock"
    assert debian.lock_path(ARM64).name == "debian-arm64.lock"
    for platform in build.ZEROSCALER.platforms:
        assert build.ZEROSCALER.lock_for(platform).is_file()
        assert debian.lock_path(platform).is_file()
    (emulator,) = debian.load_lock(debian.EMULATOR_LOCK)
    assert emulator.name == "qemu-user-static"


def test_the_example_operator_is_built_for_amd64_only(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError, match="built for amd64"):
        build.assemble(tmp_path / "root", tmp_path, print, build.BACKUP_OPERATOR, ARM64)


def test_index_is_reproducible_and_validates(tmp_path: Path) -> None:
    images = [_image("amd64"), _image("arm64", "v8", b"y")]
    a, b = tmp_path / "a.tar", tmp_path / "b.tar"
    digest = archive.write_index(images, a, "1.2.3")
    assert archive.write_index(images, b, "1.2.3") == digest
    assert a.read_bytes() == b.read_bytes()
    got = archive.validate_index(a, ["linux/amd64", "linux/arm64/v8"])
    assert got["digest"] == digest
    assert got["configs"]["linux/arm64/v8"]["variant"] == "v8"
    platforms = [m["platform"] for m in got["index"]["manifests"]]
    assert platforms == [
        {"architecture": "amd64", "os": "linux"},
        {"architecture": "arm64", "os": "linux", "variant": "v8"},
    ]


def test_index_validation_names_what_is_wrong(tmp_path: Path) -> None:
    out = tmp_path / "index.tar"
    archive.write_index([_image("amd64")], out, "1.2.3")
    with pytest.raises(archive.InvalidIndex, match="expected"):
        archive.validate_index(out, ["linux/amd64", "linux/arm64/v8"])
    with pytest.raises(ValueError, match="one image per platform"):
        archive.write_index([_image("amd64"), _image("amd64", data=b"z")], out, "1")
    # A config that says another architecture than its descriptor.
    _rewrite(out, b'"architecture":"amd64","config"', b'"architecture":"arm64","config"')
    with pytest.raises(archive.InvalidIndex, match="digest or size"):
        archive.validate_index(out, ["linux/amd64"])


def _rewrite(path: Path, old: bytes, new: bytes) -> None:
    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else b"") for m in tar]  # type: ignore[union-attr]
    with tarfile.open(path, "w") as tar:
        for member, data in members:
            data = data.replace(old, new)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
