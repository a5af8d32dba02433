"""netapp.upf.applier over FakeDpp: a batch write refused half-way (a table full) is undone
completely, past entries whose undo is refused too, which are reported and put right by the next
change; a TEID below dpp_upf_teids' size has its entry in its slot there, not in the hash map."""

from __future__ import annotations

import errno

import pytest

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.contract import DataplaneUnavailable
from netapp.upf.abi import DL4_WAYS, QFI_ANY, DownlinkKey, Output, PdrAction, PdrFlag, Role, UplinkKey, UplinkState
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site, words
from netapp.upf.models import Far, FTeid, RuleError, Session, UeIpAddress
from netapp.upf.pfcp.ies import Cause, IEType
from tests.upf.test_datapath import N3_IP, TEID, UE6, session

DOWNLINK_ROOM = 3  # one session's two downlink entries (IPv4, IPv6) and one more
TEID_SLOTS = 16  # dpp_upf_teids' size here: the tests' TEIDs lie past it, in dpp_upf_uplink


class CrampedDpp(FakeDpp):
    """A fake whose downlink table holds DOWNLINK_ROOM entries (every downlink entry there:
    dpp_upf_dl4 has too few slots for a bucket), and whose deletes of `refused` uplink keys fail
    (once each)."""

    def __init__(self, teid_slots: int = TEID_SLOTS) -> None:
        super().__init__(map_sizes={"dpp_upf_teids": teid_slots, "dpp_upf_dl4": 1})
        self.refused: set[bytes] = set()

    def _max_entries(self, name: str) -> int:
        return DOWNLINK_ROOM if name == "dpp_upf_downlink" else super()._max_entries(name)

    def table_delete(self, name, keys):  # noqa: ANN001, ANN201
        for index, key in enumerate(keys):
            if bytes(key) in self.refused:
                self.refused.discard(bytes(key))
                if index:
                    super().table_delete(name, (keys._type_ * index)(*keys[:index]))
                error = DataplaneError(errno.EBUSY, f"dpp_table_delete({name})", "refused")
                error.done = index  # type: ignore[attr-defined]
                raise error
        super().table_delete(name, keys)


def _other(seid: int, teid: int, ue: str, ue6: str) -> Session:
    base = session(seid=seid)
    up = base.pdrs[1].model_copy(update={"pdi": base.pdrs[1].pdi.model_copy(
        update={"local_fteid": FTeid(teid=teid, ipv4=N3_IP)})})
    down = base.pdrs[2].model_copy(update={"pdi": base.pdrs[2].pdi.model_copy(
        update={"ue_ip": UeIpAddress(ipv4=ue, ipv6=ue6, destination=True)})})
    return base.model_copy(update={"pdrs": {1: up, 2: down}})


@pytest.fixture
def cramped():
    fake = CrampedDpp()
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.PASS)
    upf = BpfApplier(Dataplane(fake).table, site, iface_entries({5: (Role.N3, 0), 6: (Role.N6, 1)}, N3_IP, None))
    upf.apply(None, session())
    return fake, upf


def _maps(fake: FakeDpp) -> dict[str, dict]:
    """The PDR tables' entries (dpp_upf_teids': its slots marked as holding one; dpp_upf_dl4's: its
    ways published, by bucket and address, whichever way of the bucket holds them)."""
    maps: dict[str, dict] = {name: dict(fake.tables.get(name, {})) for name in ("dpp_upf_uplink", "dpp_upf_downlink")}
    teids = fake.tables.get("dpp_upf_teids", {})
    maps["dpp_upf_teids"] = {key: value for key, value in teids.items() if value[0] & PdrFlag.ENTRY}
    ways = fake.entries("dpp_upf_dl4")
    maps["dpp_upf_dl4"] = {(slot // DL4_WAYS, way.ue_addr): bytes(way) for slot, way in ways.items()
                           if way.flags & PdrFlag.ENTRY}
    return maps


def test_a_teid_below_the_array_size_is_in_its_slot_written_and_undone_like_a_hash_entry():
    fake = CrampedDpp(teid_slots=TEID + 2)
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.PASS)
    upf = BpfApplier(Dataplane(fake).table, site, iface_entries({5: (Role.N3, 0)}, N3_IP, None))
    assert upf.teid_slots == TEID + 2
    upf.apply(None, session())
    before = _maps(fake)
    assert list(before["dpp_upf_teids"]) == [TEID.to_bytes(4, "little")] and before["dpp_upf_uplink"] == {}
    slot = PdrAction.from_buffer_copy(before["dpp_upf_teids"][TEID.to_bytes(4, "little")])
    assert slot.flags & PdrFlag.DECAP and slot.flags & PdrFlag.ENTRY

    with pytest.raises(DataplaneUnavailable, match="E2BIG after 1 of 2"):
        upf.apply(None, _other(2, TEID + 1, "10.45.0.8", "2001:db8:45::8"))  # its slot written, then undone
    assert _maps(fake) == before and upf.stale == []
    far = _other(3, TEID + 2, "10.45.0.9", "2001:db8:45::9")  # past the array: the hash map's
    upf.apply(session(), None)
    upf.apply(None, far)
    assert _maps(fake)["dpp_upf_teids"] == {} and len(_maps(fake)["dpp_upf_uplink"]) == 1

    fake.tables["dpp_upf_teids"][(TEID + 1).to_bytes(4, "little")] = bytes(slot)  # left by an earlier run
    upf.reconcile([far])
    assert _maps(fake)["dpp_upf_teids"] == {} and len(_maps(fake)["dpp_upf_uplink"]) == 1
    upf.apply(far, None)
    upf.apply(None, session())
    assert _maps(fake) == before


def test_a_batch_refused_half_way_is_undone_whole(cramped):
    fake, upf = cramped
    before = _maps(fake)
    second = _other(2, TEID + 1, "10.45.0.8", "2001:db8:45::8")
    with pytest.raises(DataplaneUnavailable, match="E2BIG after 1 of 2"):
        upf.apply(None, second)  # uplink written, then the downlink's second entry does not fit
    assert _maps(fake) == before
    assert upf.stale == []


def test_an_undo_refused_for_one_entry_goes_on_with_the_others_and_says_which(cramped):
    fake, upf = cramped
    before = _maps(fake)
    second = _other(2, TEID + 1, "10.45.0.8", "2001:db8:45::8")
    fake.refused.add(bytes(UplinkKey(teid=TEID + 1, qfi=QFI_ANY)))
    with pytest.raises(DataplaneUnavailable, match=r"left 1 entries wrong \(dpp_upf_uplink \(4098, 255\)"):
        upf.apply(None, second)
    after = _maps(fake)
    assert after["dpp_upf_downlink"] == before["dpp_upf_downlink"], "the downlink's undo went on"
    assert len(after["dpp_upf_uplink"]) == 2 and upf.stale

    upf.reconcile([session()])  # what the next change of netapp.upf.sessions runs first
    assert _maps(fake) == before and upf.stale == []


def test_a_modification_refused_half_way_puts_back_what_it_changed_and_deleted(cramped):
    fake, upf = cramped
    before = _maps(fake)
    old = session()
    new = old.model_copy(update={"pdrs": {1: old.pdrs[1]},  # the downlink PDR removed: its two entries go
                                 "fars": {**old.fars, 1: Far(id=1, apply_action=frozenset({"DROP"}))}})
    fake.refused.add(bytes(DownlinkKey(net_instance=1, family=6, addr=tuple(words(UE6)))))
    with pytest.raises(DataplaneUnavailable, match="EBUSY"):
        upf.apply(old, new)  # the uplink entry changed, then the deletes refused at the second
    assert _maps(fake) == before and upf.stale == []


def _teids_hashed(fake: FakeDpp) -> int:
    """dpp_upf_uplink_state's flag: dpp_upf_uplink may hold TEIDs' own entries."""
    value = fake.tables.get("dpp_upf_uplink_state", {}).get((0).to_bytes(4, "little"))
    return UplinkState.from_buffer_copy(value).teids if value else 0


def test_the_hash_map_is_marked_as_holding_teids_before_it_gets_one_and_unmarked_by_reconcile():
    fake = FakeDpp(map_sizes={"dpp_upf_teids": TEID + 1})
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.PASS)
    upf = BpfApplier(Dataplane(fake).table, site, iface_entries({5: (Role.N3, 0)}, N3_IP, None))
    upf.apply(None, session())  # its TEID in its slot of dpp_upf_teids: the hash map holds none
    assert _teids_hashed(fake) == 0 and _maps(fake)["dpp_upf_uplink"] == {}

    seen = []
    update = fake.table_update
    fake.table_update = lambda name, *args: (seen.append((name, _teids_hashed(fake))), update(name, *args))[1]
    far = _other(2, TEID + 1, "10.45.0.8", "2001:db8:45::8")  # past the array: the hash map's
    upf.apply(None, far)
    assert ("dpp_upf_uplink", 1) in seen and ("dpp_upf_uplink", 0) not in seen, "marked before the write"
    upf.apply(far, None)
    assert _maps(fake)["dpp_upf_uplink"] == {} and _teids_hashed(fake) == 1, "a delta never unmarks"
    upf.reconcile([session()])
    assert _teids_hashed(fake) == 0
    upf.reconcile([session(), far])
    assert _teids_hashed(fake) == 1


def test_an_entry_another_session_holds_is_refused_with_nothing_written(cramped):
    """The data path's own guard: should two sessions ever name one UE address or TEID, the second
    is refused rather than taking the first one's packets."""
    fake, upf = cramped
    before = _maps(fake)
    same_ue = _other(2, TEID + 1, "10.45.0.7", "2001:db8:45::8")  # session()'s UE IPv4 address
    with pytest.raises(RuleError, match=r"dpp_upf_downlink \(network instance 1, 10.45.0.7\) is another session's"):
        upf.apply(None, same_ue)
    same_teid = _other(3, TEID, "10.45.0.9", "2001:db8:45::9")
    with pytest.raises(RuleError, match=r"dpp_upf_uplink \(4097, 255\) is another session's") as refused:
        upf.apply(None, same_teid)
    assert refused.value.cause == Cause.RULE_CREATION_MODIFICATION_FAILURE and refused.value.ie_type == IEType.F_TEID
    assert _maps(fake) == before and upf.stale == []


def test_an_smf_address_another_session_holds_in_dpp_upf_dl4_is_refused_with_nothing_written():
    """The same guard where the SMF's UE IPv4 addresses live (the ways of dpp_upf_dl4): the second
    session is refused, the first keeps its way."""
    fake = FakeDpp(map_sizes={"dpp_upf_teids": TEID + 2, "dpp_upf_dl4": 64})
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.PASS)
    upf = BpfApplier(Dataplane(fake).table, site, iface_entries({5: (Role.N3, 0), 6: (Role.N6, 1)}, N3_IP, None))
    upf.apply(None, session())
    before = _maps(fake)
    assert before["dpp_upf_dl4"], "session()'s UE IPv4 address in a way"
    with pytest.raises(RuleError, match=r"dpp_upf_dl4 \(network instance 1, 10.45.0.7\) is another session's") as refused:
        upf.apply(None, _other(2, TEID + 1, "10.45.0.7", "2001:db8:45::8"))
    assert refused.value.ie_type == IEType.UE_IP_ADDRESS
    assert _maps(fake) == before and upf.stale == []
    # a TEID in its slot of dpp_upf_teids (an array: a slot is held when marked ENTRY)
    with pytest.raises(RuleError, match=rf"dpp_upf_teids {TEID} is another session's") as refused:
        upf.apply(None, _other(3, TEID, "10.45.0.9", "2001:db8:45::9"))
    assert refused.value.ie_type == IEType.F_TEID
    assert _maps(fake) == before and upf.stale == []


def test_a_reconcile_keeps_an_entry_two_stored_sessions_name_for_the_first(cramped):
    fake, upf = cramped
    before = _maps(fake)
    later = _other(2, TEID + 1, "10.45.0.7", "2001:db8:45::8")
    refused = upf.reconcile([session(), later])
    assert list(refused) == [2] and "another stored session's" in str(refused[2])
    assert _maps(fake) == before


def _fake_applier() -> tuple[FakeDpp, BpfApplier]:
    fake = FakeDpp(map_sizes={"dpp_upf_teids": TEID + 2, "dpp_upf_ue4": 16})  # arrays a reconcile reads whole
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.PASS)
    return fake, BpfApplier(Dataplane(fake).table, site, iface_entries({5: (Role.N3, 0), 6: (Role.N6, 1)}, N3_IP, None))


def test_a_session_a_reconcile_left_out_is_deleted_without_touching_the_maps():
    """Left out at start (it shares an entry with another stored session, or upf.peer_networks
    narrowed): its deletion deletes nothing, the other session's entries least of all."""
    fake, upf = _fake_applier()
    kept, sharing = session(), _other(2, TEID + 1, "10.45.0.7", "2001:db8:45::8")
    assert list(upf.reconcile([kept, sharing])) == [2]
    maps = _maps(fake)
    upf.apply(sharing, None)  # the SMF's Session Deletion
    assert _maps(fake) == maps


def test_a_session_a_reconcile_left_out_is_put_in_by_a_change_and_out_again_by_its_undo():
    fake, upf = _fake_applier()
    left_out = _other(2, TEID + 1, "10.45.0.8", "2001:db8:45::8")
    unknown = left_out.model_copy(update={"pdrs": {2: left_out.pdrs[2].model_copy(update={"pdi": left_out.pdrs[
        2].pdi.model_copy(update={"network_instance": "gone"})})}, "fars": {2: left_out.fars[2]}})
    assert list(upf.reconcile([session(), unknown])) == [2], "its network instance is no longer served"
    empty_of_it = _maps(fake)
    upf.apply(unknown, left_out)  # a modification that compiles: all its entries written
    upf.apply(left_out, unknown)  # the transaction failed: undone, left out again
    assert _maps(fake) == empty_of_it
    upf.apply(unknown, left_out)
    upf.committed()
    assert len(_maps(fake)["dpp_upf_teids"]) == 2
    with pytest.raises(RuleError, match="network instance 'gone' is not served"):
        upf.apply(left_out, unknown)  # in the maps now: a change to what does not compile is refused
    assert list(upf.reconcile([session(), left_out])) == [], "a reconcile keeps it in"
