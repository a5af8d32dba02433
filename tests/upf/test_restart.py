"""`netapp serve`'s UPF (netapp.upf.runtime.start_pfcp) started again over the store and the maps of a
first start, as after a restart, in the kernel (BPF_PROG_TEST_RUN), with an SMF speaking pycrate:
the stored sessions buffer, report and duplicate from the first frame on, and a session the start
left out of the maps (upf.peer_networks narrowed) is deleted, with its association, as any other."""

from __future__ import annotations

import contextlib
import socket
from typing import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.core.config import Settings
from netapp.service.store import Store
from netapp.upf.buffering import gtpu_tpdu
from netapp.upf.pfcp.ies import Cause
from netapp.upf.pfcp.server import PfcpServer
from netapp.upf.runtime import start_pfcp
from tests.upf import test_datapath as base
from tests.upf.smf import Smf, cause, create_far, create_pdr, create_qer, create_urr, find, fseid, node_id, recovery
from tests.upf.test_datapath import DL_TEID, GNB, MACS, N3_IP, SERVER, UE, dp  # noqa: F401 - dp: the module's

UE2 = "10.45.0.8"
COPY_TEID = 0x77
OUTSIDE = "198.51.100.7"  # a gNB upf.peer_networks no longer allows after the restart
ANYWHERE = ["0.0.0.0/0", "::/0"]


def upf_settings(tmp_path, peer_networks: list[str]) -> Settings:
    """`netapp serve`'s UPF on the module's namespace: its N3 and N6 interfaces, SMFs on loopback."""
    return Settings(state_dir=tmp_path, auth_disabled=True,
                    pfcp={"address": "127.0.0.1:0", "n3_ipv4": N3_IP, "peers": ["127.0.0.1"]},
                    upf={"n3_interfaces": ["n3"], "n6_interfaces": {"n6": "internet"}, "output": "pass",
                         "peer_networks": peer_networks})


@contextlib.contextmanager
def serving(settings: Settings, store: Store, dp, smf: Smf) -> Iterator[PfcpServer]:  # noqa: F811
    """The UPF started over the store and the module's maps, `smf` sending to it."""
    server = start_pfcp(settings, store, dataplane=dp)
    assert server is not None
    smf.upf = server.address
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def smf_and_store(tmp_path) -> Iterator[tuple[Smf, Store]]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    smf = Smf(("127.0.0.1", 0))
    try:
        yield smf, store
    finally:
        smf.close()
        store.close()


def establish(smf: Smf, cp_seid: int, ue: str, downlink_far: dict) -> int:
    """An uplink PDR (a TEID the UPF chooses) and a downlink one (by `ue`) with `downlink_far`: the UP SEID."""
    ies = [node_id(), fseid(cp_seid), create_pdr(1, 1, access=True, choose_id=1, flow=None, ue=ue),
           create_pdr(2, 2, access=False, flow=None, ue=ue), create_far(1, core=True), downlink_far, create_qer(),
           create_urr()]
    response = smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)
    assert cause(response) == Cause.REQUEST_ACCEPTED
    return find(response, 57)["Data"]["SEID"].get_val()


def downlink_frame(ue: str) -> bytes:
    return bytes(Ether(**MACS) / IP(src=SERVER, dst=ue) / UDP(sport=5004, dport=40000) / (b"d" * 64))


def delete_all(server: PfcpServer) -> None:
    """The maps as the test found them (whatever it asserted)."""
    for seid in list(server.upf.sessions):
        server.upf.delete(seid)


def test_the_stored_sessions_buffer_report_and_duplicate_from_the_first_frame(dp, tmp_path):  # noqa: F811
    settings = upf_settings(tmp_path, ANYWHERE)
    with smf_and_store(tmp_path) as (smf, store), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as copies:
        copies.bind(("127.0.0.1", 2152))
        copies.settimeout(10)
        with serving(settings, store, dp, smf):
            assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
            establish(smf, 1, UE, create_far(2, core=False, gnb=None, actions=("BUFF", "NOCP")))
            establish(smf, 2, UE2, create_far(2, core=False, gnb=GNB, teid=DL_TEID, actions=("FORW", "DUPL"),
                                              duplicate=("127.0.0.1", COPY_TEID)))
        with serving(settings, store, dp, smf) as again:
            try:
                buffered = dp.test_run(downlink_frame(UE), base.N6_IF)
                assert (buffered.verdict, buffered.reason) == ("DROP", "upf_buffered")
                assert find(smf.next_report(), 83) is not None, "a Downlink Data Report"
                sent = downlink_frame(UE2)
                assert dp.test_run(sent, base.N6_IF).action == "upf"
                assert copies.recv(4096) == gtpu_tpdu(COPY_TEID, bytes(Ether(sent)[IP]))
                assert again.buffering.counters["unknown"] == 0
            finally:
                delete_all(again)


@pytest.mark.parametrize("first", ["its deletion", "its association's release"])
def test_a_session_left_out_at_start_goes_with_its_deletion_or_its_association(dp, tmp_path, first):  # noqa: F811
    with smf_and_store(tmp_path) as (smf, store):
        with serving(upf_settings(tmp_path, ANYWHERE), store, dp, smf):
            assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
            establish(smf, 1, UE, create_far(2, core=False, gnb=GNB, teid=DL_TEID))
            outside = establish(smf, 2, UE2, create_far(2, core=False, gnb=OUTSIDE, teid=DL_TEID))
        with serving(upf_settings(tmp_path, [f"{GNB}/32"]), store, dp, smf) as narrowed:
            try:
                assert dp.test_run(downlink_frame(UE2), base.N6_IF).action != "upf", "left out of the maps"
                if first == "its deletion":
                    assert cause(smf.ask("PFCPSessionDeletionReq", [], seid=outside)) == Cause.REQUEST_ACCEPTED
                    assert dp.test_run(downlink_frame(UE), base.N6_IF).action == "upf", "the other's entries kept"
                assert cause(smf.ask("PFCPAssociationReleaseReq", [node_id()])) == Cause.REQUEST_ACCEPTED
                assert dp.test_run(downlink_frame(UE), base.N6_IF).action != "upf"
                assert len(narrowed.upf.sessions) == 0
            finally:
                delete_all(narrowed)
