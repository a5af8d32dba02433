"""The VM image a VNF package names: its SHA-256 and size, written into the packaged VNFD.

The repository's VNFD carries a zero hash, because the image is the operator's stock Ubuntu cloud
image and its hash changes with every point release. ``--image FILE`` stamps the hash and size of
the file the operator uploads to the VIM into the VNFD inside the package, so the descriptor OSM
onboards names exactly that image. SOL006 gives ``size`` in GB (``etsi-nfv-descriptors.yang``:
``units "GB"``), rounded up here.
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netapp.packaging.errors import PackagingError

GB = 10**9


@dataclass(frozen=True)
class ImageFacts:
    """What the VNFD's sw-image-desc says of an image file."""

    path: Path
    sha256: str
    size_bytes: int

    @classmethod
    def of(cls, path: Path) -> "ImageFacts":
        if not path.is_file():
            raise PackagingError(f"--image {path}: not a file")
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        size = path.stat().st_size
        if size == 0:
            raise PackagingError(f"--image {path}: the file is empty")
        return cls(path, digest.hexdigest(), size)

    @property
    def size_gb(self) -> int:
        return max(1, math.ceil(self.size_bytes / GB))


def stamp_image(document: dict[str, Any], image: ImageFacts) -> dict[str, Any]:
    """A copy of the VNFD document (``{"vnfd": {...}}``) whose one sw-image-desc carries the image's
    SHA-256 and size. A VNFD with several images is refused: which one the file is would be a guess."""
    stamped = copy.deepcopy(document)
    descriptors = stamped["vnfd"].get("sw-image-desc") or []
    if len(descriptors) != 1:
        ids = [d.get("id") for d in descriptors]
        raise PackagingError(
            f"--image: the VNFD has {len(ids)} sw-image-desc {ids}; --image needs exactly one"
        )
    descriptor = descriptors[0]
    descriptor["checksum"] = {"algorithm": "sha-256", "hash": image.sha256}
    descriptor["size"] = image.size_gb
    return stamped
