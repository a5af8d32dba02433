"""Tagging a Python enum with the C enum it mirrors, for the ABI modules (netapp.dataplane.abi and
each function's abi module), whose tests check the tags against BTF. Imports nothing of netapp: the
ABI modules import it while netapp.dataplane.abi is being built."""

from __future__ import annotations

from typing import Any, Callable, Optional


def c_enum(c_name: str, c_prefix: str, has_max: bool = False, c_max: Optional[int] = None) -> Callable[[Any], Any]:
    """Tag an enum with the C enum it mirrors. has_max: the C enum ends with a PREFIX_MAX count, the
    number of members unless c_max says otherwise (C_MAX: None without a PREFIX_MAX)."""

    def tag(cls: Any) -> Any:
        cls.C_NAME = c_name
        cls.C_PREFIX = c_prefix
        cls.C_MAX = (len(cls) if c_max is None else c_max) if has_max else None
        return cls

    return tag
