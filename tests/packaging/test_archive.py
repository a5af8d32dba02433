"""Archives depend on file contents and executable bits only: not on file times, owners, other
mode bits or the order the file system lists entries in."""

from __future__ import annotations

import os
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from netapp.packaging.archive import (
    DEFAULT_EPOCH,
    build_epoch,
    extract_zip,
    write_tar_gz,
    write_zip,
)
from netapp.packaging.errors import PackagingError


def make_tree(root: Path, stamp: float) -> Path:
    for rel, text, mode in [
        ("b/run", "#!/bin/sh\n", 0o750),
        ("a.txt", "a\n", 0o600),
        ("b/c.yaml", "c: 1\n", 0o664),
    ]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
        os.utime(path, (stamp, stamp))
    return root


def test_same_content_at_other_times_gives_the_same_bytes(tmp_path):
    first = make_tree(tmp_path / "one", 1_000_000_000)
    second = make_tree(tmp_path / "two", time.time())
    write_zip(first, tmp_path / "1.zip", DEFAULT_EPOCH)
    write_zip(second, tmp_path / "2.zip", DEFAULT_EPOCH)
    write_tar_gz(first, "pkg", tmp_path / "1.tar.gz", DEFAULT_EPOCH)
    write_tar_gz(second, "pkg", tmp_path / "2.tar.gz", DEFAULT_EPOCH)
    assert (tmp_path / "1.zip").read_bytes() == (tmp_path / "2.zip").read_bytes()
    assert (tmp_path / "1.tar.gz").read_bytes() == (tmp_path / "2.tar.gz").read_bytes()


def test_zip_entries_are_sorted_files_with_0644_or_0755(tmp_path):
    write_zip(make_tree(tmp_path / "t", 0), tmp_path / "t.zip", DEFAULT_EPOCH)
    with zipfile.ZipFile(tmp_path / "t.zip") as archive:
        modes = {info.filename: (info.external_attr >> 16) & 0o777 for info in archive.infolist()}
        assert [info.date_time for info in archive.infolist()] == [(1980, 1, 1, 0, 0, 0)] * 3
    assert modes == {"a.txt": 0o644, "b/c.yaml": 0o644, "b/run": 0o755}
    assert list(modes) == sorted(modes)
    extract_zip(tmp_path / "t.zip", tmp_path / "out")
    assert (tmp_path / "out/b/run").stat().st_mode & 0o777 == 0o755


def test_tar_has_one_top_folder_first_and_root_owned_entries(tmp_path):
    write_tar_gz(make_tree(tmp_path / "t", 0), "pkg", tmp_path / "t.tar.gz", 1_700_000_000)
    with tarfile.open(tmp_path / "t.tar.gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["pkg", "pkg/a.txt", "pkg/b", "pkg/b/c.yaml", "pkg/b/run"]
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 1_700_000_000)}
    assert {m.name: m.mode for m in members if m.isfile()} == {
        "pkg/a.txt": 0o644,
        "pkg/b/c.yaml": 0o644,
        "pkg/b/run": 0o755,
    }


def test_source_date_epoch_sets_the_build_time(monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert build_epoch() == DEFAULT_EPOCH
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert build_epoch() == 1_700_000_000
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(PackagingError, match="SOURCE_DATE_EPOCH='yesterday'"):
        build_epoch()
