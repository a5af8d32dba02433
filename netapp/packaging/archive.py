"""Reproducible zip and tar.gz archives of a directory tree.

Two builds of the same inputs must give byte-identical archives, so that a package's checksum
identifies its content: entries are sorted, every timestamp is one fixed build time
(``SOURCE_DATE_EPOCH``, the reproducible-builds.org convention, else 1980-01-01), owners are
root, and file modes are reduced to 0644 or 0755 (executable or not is all Juju and OSM read).
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import time
import zipfile
from pathlib import Path

from netapp.packaging.errors import PackagingError

# The earliest time a zip entry can hold (the DOS date format starts in 1980).
DEFAULT_EPOCH = 315532800
FILE_MODE = 0o644
EXEC_MODE = 0o755


def build_epoch() -> int:
    """The build time written into every archive entry: ``SOURCE_DATE_EPOCH`` or 1980-01-01."""
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None:
        return DEFAULT_EPOCH
    try:
        epoch = int(raw)
    except ValueError:
        raise PackagingError(f"SOURCE_DATE_EPOCH={raw!r} is not a number of seconds") from None
    return max(epoch, DEFAULT_EPOCH)


def normalised_mode(path: Path) -> int:
    """0755 when any execute bit is set, else 0644: the one property of a mode worth keeping."""
    return EXEC_MODE if path.stat().st_mode & 0o111 else FILE_MODE


def tree_files(root: Path) -> list[Path]:
    """Every regular file under ``root`` (symlinks followed), relative, sorted by path text."""
    found = [path.relative_to(root) for path in root.rglob("*") if path.is_file()]
    return sorted(found, key=lambda rel: rel.as_posix())


def tree_dirs(root: Path) -> list[Path]:
    """Every directory under ``root``, relative, sorted by path text."""
    found = [path.relative_to(root) for path in root.rglob("*") if path.is_dir()]
    return sorted(found, key=lambda rel: rel.as_posix())


def _replace_atomically(out: Path, data: bytes) -> None:
    """Write ``out`` in one rename, so an interrupted build leaves no half archive behind."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(out)


def write_zip(root: Path, out: Path, epoch: int) -> None:
    """Zip the files under ``root`` (no directory entries, as charmcraft's build_zip writes them)."""
    stamp = time.gmtime(epoch)[:6]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for rel in tree_files(root):
            path = root / rel
            info = zipfile.ZipInfo(rel.as_posix(), date_time=stamp)
            info.create_system = 3  # Unix, so that unzip and Juju honour the mode bits
            info.external_attr = (stat.S_IFREG | normalised_mode(path)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    _replace_atomically(out, buffer.getvalue())


def extract_zip(archive: Path, dest: Path) -> None:
    """Unpack a zip written by ``write_zip`` (or charmcraft), keeping the executable bits."""
    with zipfile.ZipFile(archive) as zipped:
        for info in zipped.infolist():
            target = dest / info.filename
            if info.filename.startswith("/") or ".." in Path(info.filename).parts:
                raise PackagingError(f"{archive.name}: entry {info.filename!r} leaves the archive")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zipped.read(info))
            target.chmod(EXEC_MODE if (info.external_attr >> 16) & 0o111 else FILE_MODE)


def _tar_info(name: str, epoch: int, mode: int, size: int = 0, is_dir: bool = False) -> tarfile.TarInfo:
    """An entry owned by root:root at the build time (osmclient's archive.add would record the
    builder's own user and file times)."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = mode
    info.size = size
    info.mtime = epoch
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_tar_gz(root: Path, top: str, out: Path, epoch: int) -> None:
    """Archive ``root`` as ``top/...`` (the folder first, then its tree in path order), gzipped
    without a file name or time in the gzip header."""
    buffer = io.BytesIO()
    entries = [(rel, True) for rel in tree_dirs(root)] + [(rel, False) for rel in tree_files(root)]
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=epoch) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as archive,
    ):
        archive.addfile(_tar_info(top, epoch, EXEC_MODE, is_dir=True))
        for rel, is_dir in sorted(entries, key=lambda entry: entry[0].as_posix()):
            name = f"{top}/{rel.as_posix()}"
            if is_dir:
                archive.addfile(_tar_info(name, epoch, EXEC_MODE, is_dir=True))
                continue
            data = (root / rel).read_bytes()
            info = _tar_info(name, epoch, normalised_mode(root / rel), size=len(data))
            archive.addfile(info, io.BytesIO(data))
    _replace_atomically(out, buffer.getvalue())
