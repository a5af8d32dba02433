"""Protected streams as an operator states them (netapp/frer/models.py) and what they compile to
(netapp/frer/compiler.py): bad input refused naming the field and what is allowed, identities that
would name two streams refused, interfaces resolved, the recovery function's parameters as the
data path takes them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from netapp.frer.abi import Algo, Flags, Role
from netapp.frer.compiler import compile_streams
from netapp.frer.models import FrerStream
from netapp.intents.errors import IntentError

INTERFACES = {"eth1": 11, "eth2": 12, "eth3": 13}
IP = {"source": "10.0.0.1", "destination": "10.0.0.2", "protocol": "udp", "destination_port": 5000}


def stream(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"handle": 5, "identification": [{"ip": IP}], "recovery": {}}
    body.update(overrides)
    return body


def errors(body: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as caught:
        FrerStream.model_validate(body)
    return [(".".join(str(part) for part in error["loc"]), error["msg"]) for error in caught.value.errors()]


def compiled(*bodies: dict[str, Any]):  # noqa: ANN201
    return compile_streams([FrerStream.model_validate(body) for body in bodies], INTERFACES.get)


@pytest.mark.parametrize(
    "body, field",
    [
        (stream(recovery={"history_length": 1}), "recovery.history_length"),
        (stream(recovery={"history_length": 33}), "recovery.history_length"),
        (stream(recovery={"algorithm": "fastest"}), "recovery.algorithm"),
        (stream(handle=0), "handle"),
        (stream(handle=4096), "handle"),
        (stream(identification=[]), "identification"),
        (stream(identification=[{"ip": {**IP, "destination": "2001:db8::1"}}]), "identification.0.ip"),
        (stream(identification=[{"null": {"destination_mac": "02:00:00:00:00:01"}, "ip": IP}]), "exactly one of null"),
        (stream(identification=[{"null": {"destination_mac": "02:00:00:00:00:01", "vlan": 4095}}]), "identification.0.null.vlan"),
        (stream(generation={"ports": [{"interface": "eth1"}]}), "exactly one of generation"),
        (stream(recovery=None), "exactly one of generation"),
        (stream(recovery=None, generation={"ports": []}), "generation.ports"),
        (stream(recovery=None, generation={"ports": [{"interface": "eth1"}, {"interface": "eth1"}]}), "each interface"),
        (stream(identification=[{"ip": {"protocol": "udp"}}]), "give source, destination or both"),
        (stream(identification=[{"ip": {"destination": "10.0.0.2", "destination_port": 80}}]),
         "destination_port needs protocol"),
        (stream(identification=[{"null": {"destination_mac": "02:00:00:00:00:01", "tagged": "tagged"}}]),
         "tagged 'tagged' takes the frames of one VLAN: give its id"),
        (stream(identification=[{"ip": {**IP, "tagged": "priority", "vlan": 5}}]),
         "tagged 'priority' takes untagged and priority-tagged (VLAN id 0) frames: give no vlan"),
        (stream(identification=[{"null": {"destination_mac": "02:00:00:00:00:01", "tagged": "all", "vlan": 5}}]),
         "tagged 'all' takes frames of any VLAN: give no vlan"),
        (stream(identification=[{"ip": {**IP, "tagged": "untagged"}}]), "identification.0.ip.tagged"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_field(body, field):
    """`field`: the path an error names, or (a model-level check) words of its message."""
    found = errors(body)
    assert any(location.startswith(field) or field in message for location, message in found), found


def test_a_recovered_stream_compiles_to_its_slot():
    latent = {"paths": 3, "difference": 4, "period_ms": 100, "reset_period_ms": 1000}
    recovery = {"algorithm": "match", "history_length": 8, "reset_timeout_ms": 250, "take_no_sequence": True,
                "pop": False, "deliver_interface": "eth3", "latent_error_detection": latent}  # fmt: skip
    tables = compiled(stream(recovery=recovery))
    slot = tables.recovery[5]
    assert (slot.algo, slot.history_len, slot.reset_ns) == (Algo.MATCH, 8, 250_000_000)
    assert slot.flags == Flags.TAKE_NO_SEQUENCE | Flags.LATENT
    assert (slot.latent_paths, slot.latent_difference, slot.latent_period_ns) == (3, 4, 100_000_000)
    assert (slot.take_any, slot.seq) == (1, 65535)
    assert (tables.streams[5].role, tables.streams[5].deliver_ifindex) == (Role.RECOVER, 13)
    (key, handle), = tables.ip.values()
    assert handle == 5 and (key.family, key.proto, key.dport) == (4, 17, 5000)
    assert bytes(key.src)[:4] == bytes([10, 0, 0, 1]), "addresses in network order, as the parser fills them"


def test_a_generated_stream_compiles_to_its_members_and_the_nodes_ports():
    ports = [{"interface": "eth1"}, {"interface": "eth2", "vlan": 30}]
    tables = compiled(stream(recovery=None, generation={"ports": ports}),
                      stream(handle=6, identification=[{"null": {"destination_mac": "02:00:00:00:00:01"}}],
                             recovery=None, generation={"ports": [{"interface": "eth2"}]}))  # fmt: skip
    assert tables.tx_ports == [11, 12]
    assert {key: member.vlan for key, member in tables.members.items()} == {(5, 11): 0, (5, 12): 30, (6, 12): 0}
    assert tables.streams[6].role == Role.GENERATE


@pytest.mark.parametrize(
    "bodies, field",
    [
        ([stream(recovery={"deliver_interface": "eth9"})], "streams[0].recovery.deliver_interface"),
        ([stream(recovery=None, generation={"ports": [{"interface": "eth9"}]})], "streams[0].generation.ports[0].interface"),
        ([stream(), stream(handle=6)], "streams[1].identification[0]"),
        ([stream(), stream()], "streams[1].handle"),
    ],
)  # fmt: skip
def test_what_cannot_be_written_is_refused_naming_the_field(bodies, field):
    with pytest.raises(IntentError) as caught:
        compiled(*bodies)
    assert [where for where, _ in caught.value.problems] == [field]


def test_an_ip_identity_compares_what_it_gives_and_masks_rank_most_specific_first():
    exact = {"ip": IP}
    subnet = {"ip": {"destination": "10.0.0.0/24", "protocol": "udp"}}
    tables = compiled(stream(identification=[subnet]), stream(handle=6, identification=[exact]))
    narrow, wide = tables.ip_masks
    assert (narrow.shape, wide.shape) == (1, 2)  # the exact identity's mask is tried first
    assert (wide.dport, wide.sport, wide.proto, wide.dscp) == (0, 0, 0xFF, 0)  # left out: any
    assert bytes(wide.dst) == bytes([255, 255, 255, 0]) + bytes(12)  # a /24, in network order
    assert list(wide.src) == [0, 0, 0, 0]
    keys = {handle: key for key, handle in tables.ip.values()}
    assert (keys[5].shape, keys[6].shape) == (2, 1)
    assert bytes(keys[5].dst)[:4] == bytes([10, 0, 0, 0])


def test_more_sets_of_compared_fields_than_a_node_tries_are_refused_naming_the_identity():
    bodies = [stream(handle=h, identification=[{"ip": {"destination": f"10.0.0.0/{16 + h}"}}]) for h in range(1, 10)]
    with pytest.raises(IntentError) as caught:
        compiled(*bodies)
    assert [where for where, _ in caught.value.problems] == ["streams[8].identification[0].ip"]
