"""ETSI GS MEC 015 v2.1.1 bandwidth management data types (BwManagementApi: BwInfo, BwInfoDeltas).

ETSI's names, enums and required members, and its looseness: fixedAllocation and allocationDirection
are strings, the session filter's addresses and ports are strings. What the data plane cannot do
with a value is said by netapp.mec.bwm_compiler, naming the field, not by a schema of ours.
v2.1.1's BwInfo carries no allocation id: the id is the last segment of the resource's URI (the
Location header of the POST).
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from netapp.mec.models import MecId

Uint32 = Annotated[int, Field(ge=0, le=(1 << 32) - 1)]

APPLICATION_SPECIFIC = 0  # requestType APPLICATION_SPECIFIC_BW_ALLOCATION
SESSION_SPECIFIC = 1  # requestType SESSION_SPECIFIC_BW_ALLOCATION
DOWNLINK, UPLINK, SYMMETRICAL = "00", "01", "10"  # allocationDirection
# fixedBWPriority: BwInfo spells its one value with an underscore, BwInfoDeltas with a space.
SEE_DESCRIPTION = "SEE_DESCRIPTION"
SEE_DESCRIPTION_DELTA = "SEE DESCRIPTION"


class _Etsi(BaseModel):
    # ETSI's types do not forbid other members; a member we do not know is kept out of the answer.
    model_config = ConfigDict(extra="ignore")


class SessionFilter(_Etsi):
    """One session: its addresses, ports and protocol, as the uplink (UE towards the application) has them."""

    sourceIp: Optional[str] = None
    sourcePort: Optional[list[str]] = None
    dstAddress: Optional[str] = None
    dstPort: Optional[list[str]] = None
    protocol: Optional[str] = None


class TimeStamp(_Etsi):
    seconds: Uint32
    nanoSeconds: Uint32


class BwInfo(_Etsi):
    """A bandwidth allocation: for an application instance's traffic or for one session."""

    appInsId: MecId
    requestType: Literal[0, 1] = Field(description="0 APPLICATION_SPECIFIC_BW_ALLOCATION, 1 SESSION_SPECIFIC_BW_ALLOCATION")
    fixedAllocation: str = Field(description="bits per second")
    allocationDirection: str = Field(description="00 downlink, 01 uplink, 10 symmetrical")
    fixedBWPriority: Optional[Literal["SEE_DESCRIPTION"]] = None
    sessionFilter: Optional[list[SessionFilter]] = None
    timeStamp: Optional[TimeStamp] = None


class BwInfoDeltas(_Etsi):
    """A PATCH of a bandwidth allocation: what it gives replaces what the allocation had."""

    appInsId: MecId
    requestType: Literal[0, 1]
    fixedAllocation: Optional[str] = None
    allocationDirection: Optional[str] = None
    fixedBWPriority: Optional[Literal["SEE DESCRIPTION"]] = None
    sessionFilter: Optional[list[SessionFilter]] = None

    def applied_to(self, allocation: BwInfo) -> BwInfo:
        """`allocation` with this PATCH's members in place of its own."""
        changes = self.model_dump(exclude_unset=True, exclude_none=True, exclude={"appInsId", "requestType"})
        if changes.get("fixedBWPriority") == SEE_DESCRIPTION_DELTA:
            changes["fixedBWPriority"] = SEE_DESCRIPTION
        return BwInfo.model_validate({**allocation.model_dump(exclude_none=True), **changes})


class BwAllocation(BaseModel):
    """A bandwidth allocation as stored: its id, its application's tenant, and the ETSI body."""

    allocationId: str
    tenant: str
    info: BwInfo
