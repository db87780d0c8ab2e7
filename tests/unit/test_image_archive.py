"""The image archive writer: the same inputs give the same bytes; the archive is consistent."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from image import build, python, static
from image.debian import Package, load_lock
from image.python import LOCK as PYTHON_LOCK
from oci import archive

FILES = [
    archive.Entry("/usr/bin/tool", 0o755, data=b"#!/bin/true\n"),
    archive.Entry("/usr", 0o755, "dir"),
    archive.Entry("/usr/bin", 0o755, "dir"),
    archive.Entry("/usr/bin/alias", 0o777, "symlink", target="tool"),
]


def _members(layer: archive.Layer) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer.blob))) as tar:
        return tar.getmembers()


def test_layer_digest_depends_on_content_not_on_order() -> None:
    one = archive.make_layer(FILES, "x")
    other = archive.make_layer(list(reversed(FILES)), "x")
    assert one.digest == other.digest
    assert one.diff_id == other.diff_id
    changed = archive.make_layer(
        [*FILES[:3], archive.Entry("/usr/bin/alias", 0o777, "symlink", target="x")], "x"
    )
    assert changed.digest != one.digest


def test_layer_members_have_fixed_times_and_owners_in_path_order() -> None:
    members = _members(archive.make_layer(FILES, "x"))
    assert [m.name for m in members] == ["usr", "usr/bin", "usr/bin/alias", "usr/bin/tool"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    assert members[2].issym()
    assert members[2].linkname == "tool"
    assert members[3].mode == 0o755


def test_gzip_header_has_no_time_and_no_name() -> None:
    blob = archive.make_layer(FILES, "x").blob
    assert blob[4:8] == b"\0\0\0\0"  # MTIME
    assert blob[3] & 0x08 == 0  # FNAME flag


def test_tree_entries_normalise_modes_and_include_parents(tmp_path: Path) -> None:
    (tmp_path / "a/b").mkdir(parents=True)
    script = tmp_path / "a/b/run"
    script.write_text("x")
    script.chmod(0o700)
    data = tmp_path / "a/b/data"
    data.write_text("y")
    data.chmod(0o600)
    (tmp_path / "a/link").symlink_to("b/run")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp").chmod(0o1777)
    os.utime(data, (12345, 12345))
    entries = {e.path: e for e in archive.entries_from_tree(tmp_path)}
    assert entries["/a/b/run"].mode == 0o755
    assert entries["/a/b/data"].mode == 0o644
    assert entries["/a/link"].kind == "symlink"
    assert entries["/a/link"].target == "b/run"
    assert entries["/tmp"].mode == 0o1777
    chosen = {e.path for e in archive.entries_from_tree(tmp_path, [data])}
    assert chosen == {"/a", "/a/b", "/a/b/data"}


def _image() -> archive.Image:
    return archive.Image(
        layers=[archive.make_layer(FILES, "first"), archive.make_layer(FILES[1:2], "second")],
        names=["docker.io/library/zeroscaler:0.1.0", "registry.example/zs:1"],
        user="65532:65532",
        env=["PATH=/usr/bin"],
        cmd=["tool"],
    )


def test_archive_is_byte_for_byte_reproducible(tmp_path: Path) -> None:
    a, b = tmp_path / "a.tar", tmp_path / "b.tar"
    assert archive.write_archive(_image(), a) == archive.write_archive(_image(), b)
    assert a.read_bytes() == b.read_bytes()


def test_archive_is_an_oci_layout_and_a_docker_save(tmp_path: Path) -> None:
    out = tmp_path / "image.tar"
    digest = archive.write_archive(_image(), out)
    got = archive.read_archive(out)
    index, docker, manifest, config = got["index"], got["docker"], got["manifest"], got["config"]
    assert {m["digest"] for m in index["manifests"]} == {digest}
    names = [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]
    assert names == ["docker.io/library/zeroscaler:0.1.0", "registry.example/zs:1"]
    # docker load reads manifest.json: short names for Docker Hub's library, the rest unchanged.
    assert docker[0]["RepoTags"] == ["zeroscaler:0.1.0", "registry.example/zs:1"]
    assert docker[0]["Config"] == "blobs/sha256/" + manifest["config"]["digest"].split(":")[1]
    assert docker[0]["Layers"] == [
        "blobs/sha256/" + layer["digest"].split(":")[1] for layer in manifest["layers"]
    ]
    assert config["rootfs"]["diff_ids"] == got["diff_ids"]
    assert len(config["history"]) == len(manifest["layers"]) == 2
    assert config["config"]["User"] == "65532:65532"
    with tarfile.open(out) as tar:
        assert json.loads(tar.extractfile("oci-layout").read()) == {"imageLayoutVersion": "1.0.0"}  # type: ignore[union-attr]


def test_a_tampered_blob_is_found(tmp_path: Path) -> None:
    out = tmp_path / "image.tar"
    archive.write_archive(_image(), out)
    raw = bytearray(out.read_bytes())
    at = raw.find(b'"User":"65532:65532"')
    raw[at + 8] = ord("0")
    out.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="does not match its digest"):
        archive.read_archive(out)


def test_a_reference_without_a_tag_is_refused(tmp_path: Path) -> None:
    layer = archive.make_layer(FILES, "x")
    untagged = archive.Image([layer], ["example.local:5000/tool"])
    with pytest.raises(ValueError, match="registry/name:tag"):
        archive.write_archive(untagged, tmp_path / "x.tar")


def test_deb_file_names_encode_the_epoch_as_apt_does() -> None:
    package = Package("zlib1g", "1:1.2.13.dfsg-1", "amd64", "0" * 64)
    assert package.filename == "zlib1g_1%3a1.2.13.dfsg-1_amd64.deb"


def test_locks_pin_every_package_with_a_hash() -> None:
    packages = load_lock()
    assert {p.name for p in packages} >= {"libc6", "python3.11-minimal", "libpython3.11-stdlib"}
    assert all(len(p.sha256) == 64 for p in packages)
    lines = [line for line in PYTHON_LOCK.read_text().splitlines() if not line.startswith("#")]
    pins = [line for line in lines if "==" in line]
    hashes = [line for line in lines if "--hash=sha256:" in line]
    assert len(pins) == len(hashes) > 10
    assert not any(line.lower().startswith("kubernetes==") for line in pins)


def test_the_example_operator_image_pins_what_its_requirements_name() -> None:
    spec = build.BACKUP_OPERATOR
    assert spec.requirements is not None
    pinned = {
        line.split(" ", 1)[0].lower() for line in spec.lock.read_text().splitlines() if "==" in line
    }
    assert {r.lower() for r in python.file_requirements(spec.requirements)} <= pinned
    for src in spec.files:
        assert (build.REPO / src).is_file()
    assert spec.name() == f"docker.io/library/backup-operator:{build.version()}"


def test_a_static_image_holds_the_binary_and_its_users_and_runs_as_nonroot(
    tmp_path: Path,
) -> None:
    binary = tmp_path / "op"
    binary.write_bytes(b"\x7fELF not really")
    spec = static.StaticSpec("op", "op (test)", lambda _say: binary, "/op")
    result = static.pack(spec, tmp_path / "op.tar", [spec.name()], lambda _m: None)
    read = archive.read_archive(result.archive)
    assert read["config"]["config"]["User"] == "65532:65532"
    assert read["config"]["config"]["Entrypoint"] == ["/op"]
    with tarfile.open(fileobj=io.BytesIO(result.layers[1].blob)) as tar:
        (member,) = tar.getmembers()
        assert member.name == "op"
        assert member.mode == 0o755
    with tarfile.open(fileobj=io.BytesIO(result.layers[0].blob)) as tar:
        names = {m.name: m for m in tar.getmembers()}
    assert names["home/nonroot"].uid == 65532
    assert names["tmp"].mode == 0o1777
    assert "nonroot:x:65532" in tar_text(result.layers[0].blob, "etc/passwd")


def tar_text(blob: bytes, name: str) -> str:
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read().decode()
