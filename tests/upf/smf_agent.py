"""The test SMF (tests/upf/smf.py, pycrate) as a process of its own, driven over stdin and stdout
with one JSON object a line: the SMF of tests/integration/test_upf_e2e.py, in its own namespace,
speaking PFCP to the UPF's N4 address.

    python -m tests.upf.smf_agent <upf address> <our address>

Commands (each answered with a JSON line holding at least the response's "cause"):
- {"op": "associate"}
- {"op": "heartbeat"}: also "recovery", the UPF's Recovery Time Stamp
- {"op": "establish", "ue": ..., "gnb": ..., "teid": ...}: one UE session, an uplink PDR by the TEID
  the UPF chooses (outer header removal, to N6 by the UPF's routing) and a downlink PDR by the UE
  address (GTP-U to the gNB with the TEID); also "seid" (the UPF's) and "teid" (the chosen one)
  With "buffer": true, the downlink FAR buffers with NOCP instead (no outer header creation); with
  "duplicate": [peer, TEID], it also duplicates (DUPL) in GTP-U to that peer.
- {"op": "move_downlink", "seid": ..., "gnb": ..., "teid": ...}: Update FAR with a new outer header
  creation and SNDEM (an end marker to the old gNB)
- {"op": "forward_downlink", "seid": ..., "gnb": ..., "teid": ...}: Update FAR: FORW, GTP-U to the gNB
- {"op": "next_report", "timeout": ...}: the next Session Report Request (answered, accepted):
  "seid" (its header's), "types" (the Report Type's flags set), "dldr_pdrs" (the Downlink Data
  Report's PDR ids)
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

from tests.upf.smf import (
    TIMEOUT_S, Smf, apply_action, cause, create_far, create_pdr, create_qer, create_urr, find, fseid, gtpu_tunnel, ie,
    ies_of, node_id, recovery, value,
)

CP_SEID = 0x5EED
RECOVERY = 1000  # ours, never changed: the UPF keeps our sessions across its restarts
UPLINK_FAR, DOWNLINK_FAR = 1, 2


class Agent:
    def __init__(self, smf: Smf, address: str):
        self.smf = smf
        self.address = address

    def associate(self) -> dict[str, Any]:
        return {"cause": cause(self.smf.ask("PFCPAssociationSetupReq", [node_id(self.address), recovery(RECOVERY)]))}

    def heartbeat(self) -> dict[str, Any]:
        response = self.smf.ask("PFCPHeartbeatReq", [recovery(RECOVERY)])
        return {"cause": 1, "recovery": value(find(response, 96))["Val"]}

    def establish(self, ue: str, gnb: str, teid: int, buffer: bool = False,
                  duplicate: Optional[tuple[str, int]] = None) -> dict[str, Any]:
        actions = ("BUFF", "NOCP") if buffer else ("FORW",)
        if duplicate is not None:
            actions += ("DUPL",)
        ies = [
            node_id(self.address),
            fseid(CP_SEID, self.address),
            create_pdr(1, UPLINK_FAR, access=True, choose_id=1, flow=None, ue=ue),
            create_pdr(2, DOWNLINK_FAR, access=False, flow=None, ue=ue),
            create_far(UPLINK_FAR, core=True),
            create_far(DOWNLINK_FAR, core=False, gnb=None if buffer else gnb, teid=teid, actions=actions,
                       duplicate=tuple(duplicate) if duplicate else None),
            create_qer(),
            create_urr(),
        ]
        response = self.smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)
        result: dict[str, Any] = {"cause": cause(response)}
        if result["cause"] == 1:
            result["seid"] = find(response, 57)["Data"]["SEID"].get_val()
            created = [item for item in ies_of(response) if item["Type"].get_val() == 8]
            result["teid"] = value(find(created[0]["Data"], 21))["TEID"]
        return result

    def move_downlink(self, seid: int, gnb: str, teid: int) -> dict[str, Any]:
        update = ie(10, [ie(108, {"Val": DOWNLINK_FAR}), ie(11, [
            gtpu_tunnel(gnb, teid),
            ie(49, {"SNDEM": 1}),
        ])])
        return {"cause": cause(self.smf.ask("PFCPSessionModificationReq", [update], seid=seid))}

    def forward_downlink(self, seid: int, gnb: str, teid: int) -> dict[str, Any]:
        update = ie(10, [ie(108, {"Val": DOWNLINK_FAR}), apply_action("FORW"), ie(11, [gtpu_tunnel(gnb, teid)])])
        return {"cause": cause(self.smf.ask("PFCPSessionModificationReq", [update], seid=seid))}

    def next_report(self, timeout: float = TIMEOUT_S) -> dict[str, Any]:
        report = self.smf.next_report(timeout)
        types = value(find(report, 39))
        dldr = find(report, 83)
        pdrs = [child["Data"]["Val"].get_val() for child in dldr["Data"] if child["Type"].get_val() == 56] if dldr else []
        return {"cause": 1, "seid": report["Hdr"]["SEID"].get_val(), "types": sorted(k for k, v in types.items() if v == 1),
                "dldr_pdrs": pdrs}


def main(argv: list[str]) -> None:
    upf, address = argv
    smf = Smf((upf, 8805), local=address)
    agent = Agent(smf, address)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        try:
            reply = getattr(agent, op)(**command)
        except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
            reply = {"cause": None, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)
    smf.close()


if __name__ == "__main__":
    main(sys.argv[1:])
