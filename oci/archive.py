"""A container image archive written byte for byte the same from the same inputs.

The tar is an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`) that also carries
the `manifest.json` of `docker save`, so `docker load`, `ctr images import` and `kind load
image-archive` all take it. Layers are gzip tars with every timestamp, owner and order fixed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True, slots=True)
class Entry:
    """One file, directory or symbolic link of a layer, at an absolute path in the image."""

    path: str
    mode: int  # permission bits
    kind: str = "file"  # file, dir or symlink
    data: bytes = b""
    target: str = ""  # symlink only
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True, slots=True)
class Layer:
    """A layer's compressed bytes and the digests the manifest and the config name it by."""

    blob: bytes
    digest: str  # of the gzip blob
    diff_id: str  # of the uncompressed tar
    comment: str

    @property
    def size(self) -> int:
        return len(self.blob)


@dataclass(frozen=True, slots=True)
class Image:
    """What the archive describes: layers, process settings and the names it is loaded under."""

    layers: Sequence[Layer]
    names: Sequence[str]  # full references, e.g. docker.io/library/zeroscaler:0.1.0
    user: str = ""
    env: Sequence[str] = ()
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    workdir: str = "/"
    labels: Mapping[str, str] = field(default_factory=dict)
    created: str = "1970-01-01T00:00:00Z"
    architecture: str = "amd64"  # OCI's (Debian's) name
    variant: str = ""  # v8 for arm64

    @property
    def platform(self) -> dict[str, str]:
        """The platform object an image index gives for this image."""
        spec = {"architecture": self.architecture, "os": "linux"}
        return spec | ({"variant": self.variant} if self.variant else {})


def entries_from_tree(root: Path, paths: Iterable[Path] | None = None) -> list[Entry]:
    """Entries for files under root (all, or the given ones with their parent directories).

    Owners become root and modes are reduced to 0755/0644 (0777 for links), so the same tree
    gives the same layer wherever and by whomever it was unpacked.
    """
    chosen = sorted(paths) if paths is not None else sorted(_walk(root))
    seen: set[str] = set()
    out: list[Entry] = []
    for path in chosen:
        rel = path.relative_to(root)
        for parent in reversed(rel.parents[:-1]):
            key = "/" + parent.as_posix()
            if key not in seen:
                seen.add(key)
                out.append(_entry(root / parent, key))
        key = "/" + rel.as_posix()
        if key not in seen:
            seen.add(key)
            out.append(_entry(path, key))
    return sorted(out, key=lambda e: e.path)


def _walk(root: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in dirnames + filenames:
            yield base / name


def _entry(path: Path, key: str) -> Entry:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return Entry(key, 0o777, "symlink", target=os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        sticky = st.st_mode & stat.S_ISVTX  # /tmp keeps 1777
        return Entry(key, 0o777 | sticky if sticky else 0o755, "dir")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: only files, directories and symbolic links go into a layer")
    mode = 0o755 if st.st_mode & 0o111 else 0o644
    return Entry(key, mode, "file", data=path.read_bytes())


def make_layer(entries: Iterable[Entry], comment: str, *, level: int = 6) -> Layer:
    """A gzip tar of the entries, in path order, with zero timestamps and numeric owners only."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in sorted(entries, key=lambda e: e.path):
            info = tarfile.TarInfo(str(PurePosixPath(e.path.lstrip("/"))))
            info.mode, info.uid, info.gid, info.mtime = e.mode, e.uid, e.gid, 0
            info.uname = info.gname = ""
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, e.target
                tar.addfile(info)
            else:
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
    tar_bytes = raw.getvalue()
    packed = io.BytesIO()
    # No file name and a zero time in the gzip header: only the content decides the digest.
    with gzip.GzipFile(filename="", fileobj=packed, mode="wb", compresslevel=level, mtime=0) as gz:
        gz.write(tar_bytes)
    blob = packed.getvalue()
    return Layer(blob, _sha(blob), _sha(tar_bytes), comment)


def _check_names(names: Iterable[str]) -> None:
    for name in names:
        if ":" not in name.rsplit("/", 1)[-1]:
            raise ValueError(f"image reference {name!r}: expected registry/name:tag")


def image_blobs(image: Image) -> tuple[str, bytes, dict[str, bytes]]:
    """The image's manifest digest, the manifest, and every blob by its layout path."""
    config = {
        "architecture": image.architecture,
        "os": "linux",
        **({"variant": image.variant} if image.variant else {}),
        "created": image.created,
        "config": _drop_empty(
            {
                "User": image.user,
                "Env": list(image.env),
                "Entrypoint": list(image.entrypoint),
                "Cmd": list(image.cmd),
                "WorkingDir": image.workdir,
                "Labels": dict(image.labels),
            }
        ),
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in image.layers]},
        "history": [
            {"created": image.created, "created_by": "python -m image", "comment": layer.comment}
            for layer in image.layers
        ],
    }
    config_blob = _json(config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": _sha(config_blob), "size": len(config_blob)},
        "layers": [
            {"mediaType": OCI_LAYER, "digest": layer.digest, "size": layer.size}
            for layer in image.layers
        ],
    }
    manifest_blob = _json(manifest)
    manifest_digest = _sha(manifest_blob)
    blobs = {_blob_path(_sha(config_blob)): config_blob, _blob_path(manifest_digest): manifest_blob}
    for layer in image.layers:
        blobs[_blob_path(layer.digest)] = layer.blob
    return manifest_digest, manifest_blob, blobs


def write_archive(image: Image, out: Path) -> str:
    """Write the image archive to out; returns the manifest digest (what registries call it by)."""
    _check_names(image.names)
    manifest_digest, manifest_blob, blobs = image_blobs(image)
    config_path = _blob_path(json.loads(manifest_blob)["config"]["digest"])
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": manifest_digest,
                "size": len(manifest_blob),
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rpartition(":")[2],
                },
            }
            for name in image.names
        ],
    }
    docker_manifest = [
        {
            "Config": config_path,
            "RepoTags": [_docker_name(name) for name in image.names],
            "Layers": [_blob_path(layer.digest) for layer in image.layers],
        }
    ]
    files: dict[str, bytes] = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": _json(index),
        "manifest.json": _json(docker_manifest),
        **blobs,
    }
    _write_tar(files, out)
    return manifest_digest


def write_index(images: Sequence[Image], out: Path, tag: str) -> str:
    """Write an OCI layout tar whose one entry is an image index of the images, one a platform.

    Returns the index's digest. `crane push` of the unpacked layout pushes that index; `ctr
    import --all-platforms` loads it under each image's names.
    """
    platforms = [json.dumps(i.platform, sort_keys=True) for i in images]
    if len(set(platforms)) != len(platforms):
        raise ValueError("an image index holds one image per platform")
    files: dict[str, bytes] = {"oci-layout": _json({"imageLayoutVersion": "1.0.0"})}
    descriptors = []
    for image in images:
        _check_names(image.names)
        digest, manifest_blob, blobs = image_blobs(image)
        files.update(blobs)
        descriptors.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": digest,
                "size": len(manifest_blob),
                "platform": image.platform,
            }
        )
    index_blob = _json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": descriptors})
    index_digest = _sha(index_blob)
    files[_blob_path(index_digest)] = index_blob
    names = sorted({name for image in images for name in image.names})
    files["index.json"] = _json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_INDEX,
                    "digest": index_digest,
                    "size": len(index_blob),
                    "annotations": {
                        "org.opencontainers.image.ref.name": tag,
                        **({"io.containerd.image.name": names[0]} if names else {}),
                    },
                }
            ],
        }
    )
    _write_tar(files, out)
    return index_digest


def _write_tar(files: Mapping[str, bytes], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    tmp.replace(out)


def read_archive(path: Path) -> dict[str, Any]:
    """The archive's index, manifests and config, each blob checked against its digest."""
    with tarfile.open(path) as tar:
        blobs: dict[str, bytes] = {}
        for member in tar.getmembers():
            if member.isfile():
                f = tar.extractfile(member)
                assert f is not None
                blobs[member.name] = f.read()
    for name, data in blobs.items():
        if name.startswith("blobs/sha256/") and _sha(data) != "sha256:" + name.rsplit("/", 1)[1]:
            raise ValueError(f"{name}: content does not match its digest")
    index = json.loads(blobs["index.json"])
    manifest = json.loads(blobs[_blob_path(index["manifests"][0]["digest"])])
    config = json.loads(blobs[_blob_path(manifest["config"]["digest"])])
    layers = [blobs[_blob_path(layer["digest"])] for layer in manifest["layers"]]
    return {
        "index": index,
        "docker": json.loads(blobs["manifest.json"]),
        "manifest": manifest,
        "config": config,
        "diff_ids": [_sha(gzip.decompress(blob)) for blob in layers],
    }


class InvalidIndex(ValueError):
    """An image index layout that a registry or a runtime would refuse, and why."""


def validate_index(path: Path, platforms: Iterable[str]) -> dict[str, Any]:
    """Check an OCI layout tar written by write_index; returns its index and each platform's config.

    Every blob must match its digest and size, every descriptor's media type its blob, the index
    must hold exactly the given platforms (os/arch[/variant]) and each image's config must say the
    platform its descriptor says.
    """
    with tarfile.open(path) as tar:
        files: dict[str, bytes] = {}
        for member in tar.getmembers():
            if member.isfile():
                f = tar.extractfile(member)
                assert f is not None
                files[member.name] = f.read()
    if json.loads(files.get("oci-layout", b"{}")).get("imageLayoutVersion") != "1.0.0":
        raise InvalidIndex("no oci-layout file of version 1.0.0")

    def blob(descriptor: Mapping[str, Any], media_type: str) -> Any:
        data = files.get(_blob_path(descriptor["digest"]))
        if data is None:
            raise InvalidIndex(f"{descriptor['digest']}: blob missing")
        if _sha(data) != descriptor["digest"] or len(data) != descriptor["size"]:
            raise InvalidIndex(f"{descriptor['digest']}: digest or size does not match the blob")
        if descriptor["mediaType"] != media_type:
            raise InvalidIndex(f"{descriptor['digest']}: media type {descriptor['mediaType']}")
        return json.loads(data) if media_type != OCI_LAYER else data

    top = json.loads(files["index.json"])
    if top.get("schemaVersion") != 2 or len(top.get("manifests", [])) != 1:
        raise InvalidIndex("index.json must name exactly one image index")
    index = blob(top["manifests"][0], OCI_INDEX)
    if index.get("schemaVersion") != 2 or index.get("mediaType") != OCI_INDEX:
        raise InvalidIndex("the image index has no schemaVersion 2 or no index media type")
    configs: dict[str, Any] = {}
    for descriptor in index["manifests"]:
        spec = descriptor.get("platform", {})
        name = "/".join(spec[k] for k in ("os", "architecture", "variant") if spec.get(k))
        manifest = blob(descriptor, OCI_MANIFEST)
        config = blob(manifest["config"], OCI_CONFIG)
        for key in ("os", "architecture", "variant"):
            if config.get(key, "") != spec.get(key, ""):
                raise InvalidIndex(f"{name}: the config says {key} {config.get(key)!r}")
        layers = [blob(layer, OCI_LAYER) for layer in manifest["layers"]]
        diff_ids = [_sha(gzip.decompress(layer)) for layer in layers]
        if diff_ids != config["rootfs"]["diff_ids"]:
            raise InvalidIndex(f"{name}: the layers do not match the config's diff_ids")
        configs[name] = config
    if sorted(configs) != sorted(platforms):
        raise InvalidIndex(f"platforms {sorted(configs)}, expected {sorted(platforms)}")
    return {"digest": top["manifests"][0]["digest"], "index": index, "configs": configs}


def _docker_name(name: str) -> str:
    # docker save writes short names for Docker Hub's library images; docker load expands them.
    return name.removeprefix("docker.io/library/").removeprefix("docker.io/")


def _drop_empty(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v}


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob_path(digest: str) -> str:
    return "blobs/sha256/" + digest.removeprefix("sha256:")
