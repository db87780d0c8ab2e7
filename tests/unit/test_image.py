"""Image archives written without a container engine: OCI layout and docker-load manifest agree."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from localcluster.image import Entry, ImageConfig, write_archive, write_layer


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def _blob(members: dict[str, bytes], digest: str) -> bytes:
    data = members[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


def _image(tmp_path: Path, name: str = "a") -> Path:
    layer = tmp_path / f"{name}.layer.tar"
    write_layer(
        layer,
        [
            Entry("bin/tool", data=b"#!/bin/sh\necho hi\n", mode=0o755),
            Entry("bin"),
            Entry("bin/alias", target="tool"),
        ],
    )
    archive = tmp_path / f"{name}.tar"
    config = ImageConfig(entrypoint=["/bin/tool"], user="65532")
    write_archive(archive, "example.local/tool:1", [layer], config)
    return archive


def test_the_oci_index_names_the_image_and_every_blob_matches_its_digest(tmp_path: Path) -> None:
    members = _members(_image(tmp_path))
    assert json.loads(members["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(members["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "example.local/tool:1"
    manifest = json.loads(_blob(members, entry["digest"]))
    config = json.loads(_blob(members, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/bin/tool"]
    assert config["config"]["User"] == "65532"
    (layer,) = manifest["layers"]
    # Uncompressed layers: the diff ID is the layer's own digest.
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]
    assert len(_blob(members, layer["digest"])) == layer["size"]


def test_the_docker_manifest_points_at_the_same_blobs(tmp_path: Path) -> None:
    members = _members(_image(tmp_path))
    (docker,) = json.loads(members["manifest.json"])
    assert docker["RepoTags"] == ["example.local/tool:1"]
    (entry,) = json.loads(members["index.json"])["manifests"]
    manifest = json.loads(_blob(members, entry["digest"]))
    assert docker["Config"] == "blobs/sha256/" + manifest["config"]["digest"].split(":")[1]
    assert docker["Layers"] == [
        "blobs/sha256/" + layer["digest"].split(":")[1] for layer in manifest["layers"]
    ]


def test_equal_inputs_give_equal_archives(tmp_path: Path) -> None:
    assert _image(tmp_path, "a").read_bytes() == _image(tmp_path, "b").read_bytes()


def test_a_layer_lists_directories_before_their_contents_with_fixed_owners(tmp_path: Path) -> None:
    layer = tmp_path / "layer.tar"
    write_layer(
        layer, [Entry("bin/tool", data=b"x"), Entry("bin"), Entry("bin/alias", target="tool")]
    )
    with tarfile.open(layer) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["bin", "bin/alias", "bin/tool"]
    assert members[0].isdir()
    assert members[1].issym()
    assert members[1].linkname == "tool"
    assert {(m.uid, m.gid, m.mtime) for m in members} == {(0, 0, 0)}


def test_a_reference_without_a_tag_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="registry/name:tag"):
        write_archive(tmp_path / "x.tar", "example.local:5000/tool", [], ImageConfig())
