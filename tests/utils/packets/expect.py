"""Expected parser results, written by hand: a full flow key (expect_ok) or a reason
(expect_reason)."""

from __future__ import annotations

from .common import Payload, _family_of, addr16


KEY_FIELDS = (
    "ifindex", "vni", "teid", "vlan", "overlay", "qfi", "flags",
    "family", "proto", "dscp", "sport", "dport", "src", "dst",
)  # fmt: skip


def expect_ok(**fields) -> dict:
    """An expected flow key: the given fields, every other field 0 (addresses 16 zero bytes)."""
    unknown = set(fields) - set(KEY_FIELDS)
    if unknown:
        raise ValueError(f"not flow key fields: {sorted(unknown)}")
    key = {name: 0 for name in KEY_FIELDS}
    key.update(src=bytes(16), dst=bytes(16))
    key.update(fields)
    return {"reason": None, **key}


def expect_reason(reason: str) -> dict:
    return {"reason": reason}


def _ue(addresses: tuple[str, str], proto: int, sport: int = 0, dport: int = 0, **more) -> dict:
    """The UE-field part of an expected key, for the innermost header built from addresses."""
    src, dst = addresses
    family = _family_of(src)
    return dict(
        family=family, proto=proto, sport=sport, dport=dport, src=addr16(src), dst=addr16(dst), **more
    )
Cases = dict[str, tuple[Payload, dict]]  # name -> (packet, hand-written expected result)
