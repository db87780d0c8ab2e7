"""Write container image archives without a container engine: layer tars and an image archive.

The archive holds an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`) and beside
it the `manifest.json` that `docker load` reads, naming the same blobs: the layout `docker save`
writes since Docker 25, which `ctr images import` and `kind load image-archive` accept too. Layers
are uncompressed tars with fixed owners and timestamps, so equal inputs give equal digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Entry:
    """One file system entry of a layer: a file (`data` or `source`), a directory or a symlink."""

    path: str
    data: bytes | None = None
    source: Path | None = None
    mode: int = 0o644
    target: str | None = None  # a symlink's target
    uid: int = 0
    gid: int = 0

    @property
    def is_dir(self) -> bool:
        return self.data is None and self.source is None and self.target is None


@dataclass(frozen=True, slots=True)
class ImageConfig:
    """The runtime part of an image config: what runs, as whom, where."""

    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Sequence[str] = ("PATH=/usr/local/bin:/usr/bin:/bin",)
    user: str = ""
    workdir: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


def write_layer(path: Path, entries: Iterable[Entry], mtime: int = 0) -> None:
    """Write a reproducible layer tar of `entries`, parent directories before their children."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(entries, key=lambda e: e.path.strip("/")):
            info = tarfile.TarInfo(entry.path.strip("/"))
            info.mtime, info.uid, info.gid, info.mode = mtime, entry.uid, entry.gid, entry.mode
            if entry.target is not None:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.target, 0o777
                tar.addfile(info)
            elif entry.is_dir:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.source is not None:
                info.size = entry.source.stat().st_size
                with entry.source.open("rb") as f:
                    tar.addfile(info, f)
            else:
                data = entry.data or b""
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def write_archive(
    path: Path,
    ref: str,
    layers: Sequence[Path],
    config: ImageConfig,
    *,
    architecture: str = "amd64",
    created: str = "1970-01-01T00:00:00Z",
) -> str:
    """Write an archive of image `ref` (registry/name:tag) from layer tars; return its digest."""
    if ":" not in ref.rsplit("/", 1)[-1]:
        raise ValueError(f"image reference {ref!r}: expected registry/name:tag")
    layer_blobs = [(_digest_file(p), p.stat().st_size, p) for p in layers]
    runtime: dict[str, object] = {"Env": list(config.env)}
    for key, value in (
        ("Entrypoint", list(config.entrypoint)),
        ("Cmd", list(config.cmd)),
        ("User", config.user),
        ("WorkingDir", config.workdir),
        ("Labels", dict(config.labels)),
    ):
        if value:
            runtime[key] = value
    config_blob = _json(
        {
            "architecture": architecture,
            "os": "linux",
            "created": created,
            "config": runtime,
            "rootfs": {"type": "layers", "diff_ids": [d for d, _s, _p in layer_blobs]},
            "history": [{"created": created, "created_by": "localcluster.image"} for _ in layers],
        }
    )
    config_digest = _digest(config_blob)
    manifest_blob = _json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": _descriptor(CONFIG_MEDIA_TYPE, config_digest, len(config_blob)),
            "layers": [_descriptor(LAYER_MEDIA_TYPE, d, s) for d, s, _p in layer_blobs],
        }
    )
    manifest_digest = _digest(manifest_blob)
    tag = ref.rsplit(":", 1)[1]
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [
            {
                **_descriptor(MANIFEST_MEDIA_TYPE, manifest_digest, len(manifest_blob)),
                "annotations": {
                    "io.containerd.image.name": ref,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    docker_manifest = [
        {
            "Config": _blob_name(config_digest),
            "RepoTags": [ref],
            "Layers": [_blob_name(d) for d, _s, _p in layer_blobs],
        }
    ]
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "blobs", None)
        _add_bytes(tar, "blobs/sha256", None)
        for digest, size, layer in layer_blobs:
            info = _info(_blob_name(digest))
            info.size = size
            with layer.open("rb") as f:
                tar.addfile(info, f)
        _add_bytes(tar, _blob_name(config_digest), config_blob)
        _add_bytes(tar, _blob_name(manifest_digest), manifest_blob)
        _add_bytes(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        _add_bytes(tar, "index.json", _json(index))
        _add_bytes(tar, "manifest.json", _json(docker_manifest))
    return manifest_digest


def _descriptor(media_type: str, digest: str, size: int) -> dict[str, object]:
    return {"mediaType": media_type, "digest": digest, "size": size}


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _digest_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _blob_name(digest: str) -> str:
    return "blobs/sha256/" + digest.removeprefix("sha256:")


def _info(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime, info.mode = 0, 0o644
    return info


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes | None) -> None:
    info = _info(name)
    if data is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        return
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
