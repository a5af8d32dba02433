"""The service stays in pieces a newcomer can read: no module of netapp/service over 600 lines, no
class over 400 (a new network function adds a module of its own instead of growing these)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[2] / "netapp" / "service"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400
MODULES = sorted(SERVICE.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[path.name for path in MODULES])
def test_given_a_service_module_then_it_and_its_classes_stay_small(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path.name}: split it by concern"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            assert lines <= MAX_CLASS_LINES, f"{path.name}: class {node.name} has {lines} lines"
