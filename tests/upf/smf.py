"""A test SMF: PFCP requests built, and responses decoded, with pycrate (pycrate_mobile.TS29244_PFCP),
a codec independent of the one the endpoint uses, over a real UDP socket."""

from __future__ import annotations

import ipaddress
import itertools
import socket
import time
from typing import Any, Optional

from pycrate_mobile import TS29244_PFCP as P

UE = "10.45.0.2"  # the UE address of the requests' PDRs
TIMEOUT_S = 10.0  # the longest a response may take on a loaded machine; no test waits it out


def ie(ie_type: int, data: Any) -> dict[str, Any]:
    return {"Type": int(ie_type), "Data": data}


def node_id(address: str = "10.0.0.1") -> dict[str, Any]:
    return ie(60, {"Type": 0, "Val": address})


def recovery(stamp: int) -> dict[str, Any]:
    return ie(96, {"Val": stamp})


def fseid(seid: int, address: str = "10.0.0.1") -> dict[str, Any]:
    return ie(57, {"V4": 1, "SEID": seid, "IPv4Addr": address})


def create_pdr(pdr_id: int, far_id: int, *, access: bool, choose_id: Optional[int] = None,
               flow: Optional[str] = "permit out ip from any to assigned", qer: Optional[int] = 1,
               urr: Optional[int] = 1, ue: Optional[str] = UE) -> dict[str, Any]:
    """A PDR; `ue` None: its UE IP Address asks the UPF to choose (CHV4)."""
    pdi = [ie(20, {"If": 0 if access else 2}), ie(22, b"internet")]
    if access:
        pdi.append(ie(21, {"CH": 1, "CHID": int(choose_id is not None), "V4": 1, "CHOOSE_ID": choose_id or 0}))
    pdi.append(ie(93, {"V4": 1, "SD": int(not access), "IPv4Addr": ue} if ue else {"CHV4": 1, "SD": int(not access)}))
    if flow is not None:  # None: no SDF filter
        pdi.append(ie(23, {"FD": 1, "FlowDesc": {"Val": flow.encode()}}))
    rule = [ie(56, {"Val": pdr_id}), ie(29, {"Val": 100 + pdr_id}), ie(2, pdi), ie(108, {"Val": far_id})]
    if access:
        rule.append(ie(95, {"Desc": 0}))
    if qer is not None:
        rule.append(ie(109, {"Val": qer}))
    if urr is not None:
        rule.append(ie(81, {"Val": urr}))
    return ie(1, rule)


def create_far(far_id: int, *, core: bool, gnb: Optional[str] = "192.0.2.10", teid: int = 0x100,
               actions: tuple[str, ...] = ("FORW",), duplicate: Optional[tuple[str, int]] = None) -> dict[str, Any]:
    """A FAR; an access one has an outer header creation (GTP-U to `gnb` with `teid`) unless `gnb` is
    None; `duplicate` (peer, TEID): duplicating parameters, GTP-U to that peer."""
    forwarding = [ie(42, {"Val": 1 if core else 0})]
    if not core and gnb is not None:
        forwarding.append(gtpu_tunnel(gnb, teid))
    rule = [ie(108, {"Val": far_id}), apply_action(*actions), ie(4, forwarding)]
    if duplicate is not None:
        rule.append(ie(5, [ie(42, {"Val": 4}), gtpu_tunnel(*duplicate)]))  # destination: LI function
    return ie(3, rule)


def apply_action(*actions: str) -> dict[str, Any]:
    return ie(44, {"Octet1": dict.fromkeys(actions, 1)})


def gtpu_tunnel(peer: str, teid: int) -> dict[str, Any]:
    """Outer Header Creation: GTP-U/UDP/IPv4 to `peer` with `teid`."""
    return ie(84, {"GTPU_UDP_IPv4": 1, "TEID": teid, "IPv4Addr": peer})


def create_qer(qer_id: int = 1) -> dict[str, Any]:
    return ie(7, [ie(109, {"Val": qer_id}), ie(25, {"ULGate": 0, "DLGate": 0}), ie(26, {"UL": 100_000, "DL": 200_000}),
                  ie(124, {"QFI": 9})])


def create_urr(urr_id: int = 1) -> dict[str, Any]:
    return ie(6, [ie(81, {"Val": urr_id}), ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {"VOLTH": 1}}),
                  ie(31, {"TOVOL": 1, "Total": 10_000_000})])


def ue_of(cp_seid: int) -> str:
    """The UE address of the session an SMF numbers `cp_seid` (1: UE): each session's is its own,
    as the UPF requires of the downlink's UE addresses."""
    return str(ipaddress.IPv4Address(UE) + cp_seid - 1)


def establishment_ies(cp_seid: int, sdf: bool = True) -> list[dict[str, Any]]:
    """4 PDRs (2 uplink sharing one CHOOSE ID, 2 downlink; with SDF filters unless `sdf` is False),
    2 FARs, 1 QER, 1 URR; the UE's address `ue_of(cp_seid)`."""
    default, dns, web = ("permit out ip from any to assigned", "permit out 17 from any 53 to assigned",
                         "permit out 6 from 198.51.100.0/24 80,443 to assigned") if sdf else (None, None, None)
    ue = ue_of(cp_seid)
    return [
        node_id(),
        fseid(cp_seid),
        create_pdr(1, 1, access=True, choose_id=1, flow=default, ue=ue),
        create_pdr(2, 1, access=True, choose_id=1, flow=dns, ue=ue),
        create_pdr(3, 2, access=False, flow=default, ue=ue),
        create_pdr(4, 2, access=False, flow=web, ue=ue),
        create_far(1, core=True),
        create_far(2, core=False),
        create_qer(),
        create_urr(),
    ]

SESSION_REPORT_REQUEST = 56  # the one request a UPF sends an SMF that tests see


class Smf:
    """One SMF's socket: requests out, responses in, each decoded with pycrate."""

    def __init__(self, upf: tuple[str, int], local: str = "127.0.0.1"):
        self.upf = upf
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind((local, 0))
        self.socket.settimeout(TIMEOUT_S)
        self._seq = itertools.count(1)
        self.reports: list[Any] = []  # Session Report Requests the UPF sent while we waited

    def close(self) -> None:
        self.socket.close()

    def build(
        self, name: str, ies: list[dict[str, Any]], seid: Optional[int] = None, seq: Optional[int] = None
    ) -> bytes:
        cls = getattr(P, name)
        header: dict[str, Any] = {"SeqNum": next(self._seq) if seq is None else seq}
        if seid is not None:
            header["SEID"] = seid
        return cls(val={"Hdr": header, f"{name}IEs": ies}).to_bytes()

    def send(self, data: bytes) -> None:
        self.socket.sendto(data, self.upf)

    def receive_raw(self) -> bytes:
        data, _ = self.socket.recvfrom(65535)
        return data

    def receive(self) -> Any:
        msg, error = P.parse_PFCP(self.receive_raw())
        assert msg is not None and error == 0, f"pycrate could not decode the response (error {error})"
        return msg

    def ask(self, name: str, ies: list[dict[str, Any]], seid: Optional[int] = None) -> Any:
        """Send a request and return its response. Session Report Requests the UPF sends meanwhile
        (usage reports) are answered, accepted, and kept in `reports`, as an SMF would."""
        self.send(self.build(name, ies, seid))
        while True:
            msg, error = P.parse_PFCP(self.receive_raw())
            if msg is None or msg["Hdr"]["Type"].get_val() != SESSION_REPORT_REQUEST:
                assert msg is not None and error == 0, f"pycrate could not decode the response (error {error})"
                return msg
            self._accept(msg)

    def next_report(self, timeout: float = TIMEOUT_S) -> Any:
        """The first Session Report Request not yet taken: one `ask` kept, else the next to come
        (accepted); TimeoutError if none comes within `timeout`. Other messages are ignored."""
        if self.reports:
            return self.reports.pop(0)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.socket.settimeout(left)
            try:
                msg, _ = P.parse_PFCP(self.receive_raw())
            except socket.timeout:
                break
            finally:
                self.socket.settimeout(TIMEOUT_S)
            if msg is not None and msg["Hdr"]["Type"].get_val() == SESSION_REPORT_REQUEST:
                self._accept(msg)
                return self.reports.pop()
        raise TimeoutError(f"no Session Report Request within {timeout} s")

    def _accept(self, msg: Any) -> None:
        """Keep a Session Report Request and answer it, accepted, as an SMF would."""
        # pycrate's table of the Usage Report's mandatory IEs is wrong: error tolerated here
        self.reports.append(msg)
        self.send(self.build("PFCPSessionReportResp", [ie(19, 1)], seid=0, seq=msg["Hdr"]["SeqNum"].get_val()))


def ies_of(msg: Any) -> list[Any]:
    return list(msg[1])


def find(container: Any, ie_type: int) -> Optional[Any]:
    """The first IE of the type in a message or a grouped IE's data."""
    items = ies_of(container) if isinstance(container, P.PFCPMsg) else list(container)
    return next((item for item in items if item["Type"].get_val() == ie_type), None)


def grouped(ie_item: Any, cls_name: str) -> Any:
    """A grouped IE pycrate left raw (its table of mandatory IEs disagrees), decoded without that table."""
    data = getattr(P, cls_name)()
    P.PFCPIEs.VERIF_MAND = False
    try:
        data.from_bytes(ie_item["Data"].to_bytes())
    finally:
        P.PFCPIEs.VERIF_MAND = True
    return data


def cause(msg: Any) -> int:
    return find(msg, 19)["Data"].get_val()


def value(ie_item: Any) -> Any:
    """An IE's data: a dict of its fields' values for a structured IE, else its value."""
    data = ie_item["Data"]
    if getattr(data, "_by_name", None):
        return {name: data[name].get_val() for name in data._by_name}
    return data.get_val()
