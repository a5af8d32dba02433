"""Read an intents file (JSON or YAML) into an IntentDocument."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

from netapp.intents.errors import IntentError
from netapp.intents.models import IntentDocument, parse_document

YAML_SUFFIXES = (".yaml", ".yml")


class IntentFileError(IntentError):
    """The file cannot be read or is neither JSON nor YAML."""


def load_document(path: Union[str, Path]) -> IntentDocument:
    """Parse and validate an intents file; IntentError names the field (or the file) at fault."""
    return parse_document(read_data(Path(path)))


def read_data(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise IntentFileError.at("", f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise IntentFileError.at("", "cannot read the file: not UTF-8 text") from None
    if path.suffix.lower() in YAML_SUFFIXES:
        return _parse_yaml(text)
    return _parse_json(text)


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise IntentFileError.at(
            "", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


def _parse_yaml(text: str) -> Any:
    import yaml  # only YAML files need it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise IntentFileError.at("", "not valid YAML: " + " ".join(str(exc).split())) from None
