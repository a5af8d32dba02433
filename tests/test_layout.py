"""The size limits of issue 16 ("Done when"), as `wc -l` counts them: no C file over 700 lines (every
.c and .h under dataplane/, build outputs aside), no Python module over 600 lines and no class over
400 lines (from its `class` line to its last line) in netapp/.

The files still over a limit are in ALLOWED with their size when listed as a ceiling: they may
shrink, not grow. A file or class over a limit and not in ALLOWED fails, and so does an entry that
is no longer over its limit (remove it: the limit then holds for that file too)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
C_FILE_LIMIT = 700
MODULE_LIMIT = 600
CLASS_LIMIT = 400
GENERATED_C = ("vmlinux.h", ".skel.h")  # written by bpftool, wherever a build puts them

# issue 16: being split. "path" (a C file or a Python module) or "path::Class" -> its line count
# when listed, the most it may have until it is split under its limit.
ALLOWED: dict[str, int] = {}


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def _c_files() -> list[Path]:
    return [
        path
        for path in sorted((REPO / "dataplane").rglob("*"))
        if path.suffix in (".c", ".h")
        and "build" not in path.relative_to(REPO).parts
        and not path.name.endswith(GENERATED_C)
    ]


@functools.cache
def _sizes() -> dict[str, tuple[int, int]]:
    """Every C file, Python module and class measured: name -> (lines, limit)."""
    sizes = {path.relative_to(REPO).as_posix(): (_lines(path), C_FILE_LIMIT) for path in _c_files()}
    for path in sorted((REPO / "netapp").rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        source = path.read_text()
        sizes[name] = (source.count("\n"), MODULE_LIMIT)
        if sizes[name][0] <= CLASS_LIMIT:
            continue  # no class in it can be over the limit: spare the parse
        for node in ast.walk(ast.parse(source, filename=name)):
            if isinstance(node, ast.ClassDef):
                sizes[f"{name}::{node.name}"] = (node.end_lineno - node.lineno + 1, CLASS_LIMIT)
    return sizes


def _over_limit() -> dict[str, int]:
    return {name: lines for name, (lines, limit) in _sizes().items() if lines > limit}


def test_the_layout_is_measured():
    sizes = _sizes()
    assert any(name.endswith(".bpf.c") for name in sizes), "no BPF program found under dataplane/"
    assert any(name.startswith("netapp/") for name in sizes), "no Python module found in netapp/"


def test_no_new_file_or_class_is_over_its_limit():
    new = {name: lines for name, lines in _over_limit().items() if name not in ALLOWED}
    assert not new, (
        f"over the limit (C file {C_FILE_LIMIT}, Python module {MODULE_LIMIT}, class {CLASS_LIMIT} "
        f"lines): {new}; split them"
    )


def test_allow_listed_files_do_not_grow():
    grown = {
        name: f"{lines} lines, ceiling {ALLOWED[name]}"
        for name, lines in _over_limit().items()
        if name in ALLOWED and lines > ALLOWED[name]
    }
    assert not grown, f"allow-listed as being split, and grown: {grown}; split them instead"


def test_the_allow_list_names_only_what_is_still_over_its_limit():
    stale = sorted(set(ALLOWED) - set(_over_limit()))
    assert not stale, f"no longer over their limit (or gone): {stale}; remove them from ALLOWED"
