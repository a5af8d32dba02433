"""Action parameters checked and decoded (no ops import): a ParamError names the parameter at fault."""

from __future__ import annotations

import json
import re
from typing import Any, Optional

MODES = ("native", "generic", "offload")
# Ids the API takes in a path (netapp/intents/models.py IntentId, netapp/api/routes/slices.py
# SliceIdPath): anything else, a "/" above all, would never reach the right route.
ID_CHARS = re.compile(r"^[A-Za-z0-9._-]+$")
MAX_INTENT_ID = 64
MAX_SLICE_ID = 48


class ParamError(ValueError):
    """A bad action parameter; the message starts with its name."""

    def __init__(self, param: str, message: str):
        super().__init__(f"{param}: {message}")
        self.param = param


def text(params: dict[str, Any], name: str) -> str:
    """A required, non-empty string."""
    value = params.get(name)
    if value is None:
        raise ParamError(name, "required")
    if not isinstance(value, str) or not value.strip():
        raise ParamError(name, "must be a non-empty string")
    return value.strip()


def json_object(params: dict[str, Any], name: str, key: str = "id") -> dict[str, Any]:
    """A string holding a JSON object with a `key` member."""
    value = _json(params, name)
    if not isinstance(value, dict):
        raise ParamError(name, "must be a JSON object")
    if key and not isinstance(value.get(key), (str, int)):
        raise ParamError(name, f"the object needs an {key!r}")
    return value


def identifier(params: dict[str, Any], name: str, max_length: int) -> str:
    """A required id as the API's paths take it."""
    return check_id(name, text(params, name), max_length)


def check_id(name: str, value: Any, max_length: int) -> str:
    """`value` if it is an id the API's paths take; ParamError naming `name` otherwise."""
    value = str(value)
    if len(value) > max_length or not ID_CHARS.match(value):
        raise ParamError(
            name, f"{value!r} is not an id: 1 to {max_length} letters, digits, '.', '_' or '-' (no '/' or space)"
        )
    return value


def json_groups(params: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A string holding a non-empty JSON list of objects, each with an integer id."""
    value = _json(params, name)
    if not isinstance(value, list) or not value:
        raise ParamError(name, "must be a non-empty JSON list of groups")
    for index, group in enumerate(value):
        if not isinstance(group, dict) or not isinstance(group.get("id"), int) or isinstance(group.get("id"), bool):
            raise ParamError(name, f"item {index} must be an object with an integer 'id'")
    return value


def mode(params: dict[str, Any], name: str = "mode") -> str:
    """An XDP mode (default native)."""
    value = params.get(name, "native")
    if value not in MODES:
        raise ParamError(name, f"must be one of {', '.join(MODES)}, not {value!r}")
    return value


def positive_int(params: dict[str, Any], name: str) -> int:
    """A required integer of at least 1."""
    return integer(params, name, 1)


def integer(params: dict[str, Any], name: str, low: int, high: Optional[int] = None, default: Optional[int] = None) -> int:
    """An integer from `low` to `high` (None: no bound); required unless it has a `default`."""
    value = params.get(name, default)
    if value is None:
        raise ParamError(name, "required")
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = f"of at least {low}" if high is None else f"from {low} to {high}"
        raise ParamError(name, f"must be an integer {bounds}, not {value!r}")
    return value


def boolean(params: dict[str, Any], name: str, default: bool) -> bool:
    """A true or false (`default` when not given)."""
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise ParamError(name, f"must be true or false, not {value!r}")
    return value


def csv(params: dict[str, Any], name: str) -> list[str]:
    """A comma-separated list (empty string: none)."""
    value = params.get(name, "")
    if not isinstance(value, str):
        raise ParamError(name, "must be a comma-separated string")
    return [item.strip() for item in value.split(",") if item.strip()]


def _json(params: dict[str, Any], name: str) -> Any:
    raw = text(params, name)
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ParamError(name, f"not valid JSON ({exc.msg} at character {exc.pos})") from None
