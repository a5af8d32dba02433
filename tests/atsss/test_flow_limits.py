"""The bounds of MEC 015 flow filters (netapp.atsss.flows): what a filter, a session and a tenant may
take of the shared classifier, the refusals naming the field at fault, the weighted mode refused
where every path's weight is 0, and one lock order with the intents' transactions."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Iterator

import pytest
from pydantic import ValidationError

from netapp.atsss import store as stored
from netapp.atsss.flows import MAX_FLOW_FILTERS, MAX_TENANT_SHAPES, apply_rules, check_overlaps, session_rules
from netapp.atsss.models import AtsssSessionPatch, SteeringMode
from netapp.atsss.mts import MtsSessionInfo, flow_filters
from netapp.atsss.service import Atsss
from netapp.core.config import Settings
from netapp.service.contract import InvalidInput, QuotaExceeded
from netapp.service.function_rules import FunctionRules
from netapp.service.store import Store
from netapp.service.transaction import Transactions
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.atsss.atsss import path_body
from tests.atsss.test_flows import ADMIN, UE, VIDEO, node, rule_machinery, session, steer_flows  # noqa: F401
from tests.utils.service import grant_subnets

UDP = 17
# Far more than either change takes on a loaded machine (only a deadlock reaches it), twice within
# the suite's timeout per test.
JOIN_SECONDS = 30


def mts_body(filters: list[dict[str, Any]]) -> dict[str, Any]:
    return {"appInsId": "app-1", "requestType": 1, "flowFilter": filters, "qosD": {}, "mtsMode": 0,
            "trafficDirection": "00"}


def refusal(filters: list[dict[str, Any]]) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        session_rules("m", UE, filters, SteeringMode.ACTIVE_STANDBY)
    return refused.value


# --- one filter's fields --------------------------------------------------------------------------


def test_a_source_that_is_no_address_is_refused_naming_sourceIp():
    assert refusal([{"dstIp": UE, "sourceIp": "bogus"}]).field == "flowFilter[0].sourceIp"


def test_a_prefix_with_host_bits_set_is_told_so():
    refused = refusal([{"dstIp": UE, "sourceIp": "10.0.0.1/24"}])

    assert refused.field == "flowFilter[0].sourceIp"
    assert "host bits set: the prefix is 10.0.0.0/24" in str(refused)


def test_too_many_port_pairs_name_the_longer_list():
    refused = refusal([{"dstIp": UE, "protocol": UDP, "sourcePort": list(range(5000, 5009)), "dstPort": [1, 2]}])

    assert refused.field == "flowFilter[0].sourcePort"


def test_filters_of_dstip_alone_are_told_apart_from_filters_selecting_flows():
    with pytest.raises(InvalidInput) as refused:
        flow_filters(MtsSessionInfo.model_validate(mts_body([{"dstIp": UE}, {"dstIp": UE}])))

    assert refused.value.field == "flowFilter[0]"
    assert "other filters select flows" not in str(refused.value)


def test_a_session_holds_at_most_max_flow_filters():
    filters = [{"dstIp": UE, "protocol": UDP, "dstPort": [port]} for port in range(MAX_FLOW_FILTERS + 1)]

    MtsSessionInfo.model_validate(mts_body(filters[:MAX_FLOW_FILTERS]))
    with pytest.raises(ValidationError) as refused:
        MtsSessionInfo.model_validate(mts_body(filters))

    assert refused.value.errors()[0]["loc"] == ("flowFilter",)


def test_a_filter_repeated_is_one_set_of_rules():
    filters = [{"dstIp": UE, "protocol": UDP, "dstPort": [1, 2, 3]}] * MAX_FLOW_FILTERS

    assert len(session_rules("m", UE, filters, SteeringMode.ACTIVE_STANDBY)) == 3


def test_an_overlap_of_other_members_and_a_prefix_holding_an_address_is_found():
    # 24 + 8 + 6 bits and 32 + 6: as specific; one packet (from 198.18.0.5, UDP, DSCP 34) matches both.
    wide = session_rules("wide", UE, [{"dstIp": UE, "sourceIp": "198.18.0.0/24", "protocol": UDP, "dscp": 34}],
                         SteeringMode.ACTIVE_STANDBY)
    host = {"dstIp": UE, "sourceIp": "198.18.0.5", "dscp": 34}
    other_dscp = session_rules("apart", UE, [{**host, "dscp": 35}], SteeringMode.ACTIVE_STANDBY)

    check_overlaps("apart", other_dscp, [("wide", wide)])
    with pytest.raises(InvalidInput) as refused:
        check_overlaps("host", session_rules("host", UE, [VIDEO, host], SteeringMode.ACTIVE_STANDBY), [("wide", wide)])

    assert refused.value.field == "flowFilter[1]" and "'wide'" in str(refused.value)


# --- the classifier, the tenant's share of it -----------------------------------------------------


@pytest.fixture
def service(node, store, node_ns) -> Iterator[tuple[Atsss, FunctionRules]]:  # noqa: F811
    """ATSSS's service over the instance with the service's rule machinery; what the test left
    in the classifier taken out."""
    grant_subnets(store, {"tenant-a": (UE, ())})
    state = rule_machinery(node)
    rules = FunctionRules(state, "atsss")
    atsss = Atsss.start(store, node.table, netns=node_ns, rules=rules)
    yield atsss, rules
    clear(atsss)
    with state.lock:
        change = state.rule_change()
        for rule_id in list(state.index.rule_ids()):
            change.remove(rule_id)
        change.apply_to_maps()


def clear(atsss: Atsss) -> None:
    """The test's MTS sessions and sessions out of the maps (the instance is the module's)."""
    for tenant, mts_id, _, _ in stored.load_mts(atsss.store):
        atsss.unsteer(tenant, mts_id)
    for found in atsss.list_sessions(ADMIN):
        atsss.delete_session(ADMIN, f"{found.tenant}/{found.name}")


def set_quota(store: Store, tenant: str, flow_rules: int) -> None:
    spec = TenantSpec.model_validate({"traffic": [{"dst": f"{UE.rsplit('.', 1)[0]}.0/24"}],
                                      "quotas": {"atsss_flow_rules": flow_rules}})
    TenantService(lambda: store).put_tenant(ADMIN, tenant, spec)


def test_a_rule_the_classifier_refuses_names_its_filter_and_what_is_allowed(service):
    _, rules = service
    (taken,) = session_rules("first", UE, [VIDEO], SteeringMode.ACTIVE_STANDBY).values()
    undo = apply_rules(rules, {}, {taken.intent_id: taken})
    same_key = dataclasses.replace(taken, intent_id="atsss#second#3#0")

    with pytest.raises(InvalidInput) as refused:
        apply_rules(rules, {}, {same_key.intent_id: same_key})
    undo()

    assert refused.value.field == "flowFilter[3]"
    assert refused.value.allowed is not None and "shapes" in refused.value.allowed


def test_a_tenant_holds_at_most_its_quota_of_flow_rules(service, store):
    atsss, _ = service
    set_quota(store, "tenant-a", 4)
    atsss.create_session(ADMIN, "tenant-a/ue7", session())
    steer_flows(atsss, "three", [{"dstIp": UE, "protocol": UDP, "dstPort": [1, 2, 3]}], SteeringMode.ACTIVE_STANDBY,
                tenant="tenant-a")

    with pytest.raises(QuotaExceeded) as refused:
        steer_flows(atsss, "two", [{"dstIp": UE, "protocol": UDP, "dstPort": [4, 5]}], SteeringMode.ACTIVE_STANDBY,
                    tenant="tenant-a")
    steer_flows(atsss, "one", [{"dstIp": UE, "protocol": UDP, "dstPort": [4]}], SteeringMode.ACTIVE_STANDBY,
                tenant="tenant-a")

    assert refused.value.extra["quota"] == "atsss_flow_rules"
    assert len(rules_of(atsss)) == 4


def rules_of(atsss: Atsss) -> dict:
    assert atsss.rules is not None
    return dict(atsss.rules.rules)


def test_a_tenant_takes_at_most_its_share_of_the_classifiers_shapes(service):
    atsss, _ = service
    atsss.create_session(ADMIN, "tenant-a/ue7", session())
    # Each prefix length of sourceIp is a shape of its own.
    filters = [{"dstIp": UE, "sourceIp": f"198.18.0.0/{16 + n}"} for n in range(MAX_TENANT_SHAPES + 1)]

    with pytest.raises(InvalidInput) as refused:
        steer_flows(atsss, "many", filters, SteeringMode.ACTIVE_STANDBY, tenant="tenant-a")

    assert refused.value.field == f"flowFilter[{MAX_TENANT_SHAPES}]"
    assert rules_of(atsss) == {}


# --- weighted with every weight 0 -----------------------------------------------------------------


def unweighted_session():
    return session().model_copy(update={"paths": [
        session().paths[0].model_copy(update={"weight": 0}), session().paths[1].model_copy(update={"weight": 0})]})


def test_a_weighted_flow_is_refused_where_every_weight_is_0(service):
    atsss, _ = service
    atsss.create_session(ADMIN, "tenant-a/ue7", unweighted_session())

    with pytest.raises(InvalidInput) as refused:
        steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED, tenant="tenant-a")

    assert refused.value.field == "mtsMode"
    assert rules_of(atsss) == {}


def test_every_weight_made_0_under_a_weighted_flow_is_refused(service):
    atsss, _ = service
    atsss.create_session(ADMIN, "tenant-a/ue7", session())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED, tenant="tenant-a")
    patch = AtsssSessionPatch.model_validate({"paths": [{"index": 0, "weight": 0}, {"index": 1, "weight": 0}]})

    with pytest.raises(InvalidInput) as patched:
        atsss.patch_session(ADMIN, "tenant-a/ue7", patch)
    with pytest.raises(InvalidInput) as put:
        atsss.put_session(ADMIN, "tenant-a/ue7", unweighted_session())

    assert patched.value.field == put.value.field == "paths"
    assert [path.weight for path in atsss.get_session(ADMIN, "tenant-a/ue7").paths] == [1, 1]


# --- lock order -----------------------------------------------------------------------------------


class NoticedLock:
    """The service's lock, telling (`wanted`) when the MTS thread asks for it."""

    def __init__(self, lock: Any, wanted: threading.Event):
        self._lock, self._wanted = lock, wanted

    def __enter__(self) -> None:
        if threading.current_thread().name == "mts":
            self._wanted.set()
        self._lock.acquire()

    def __exit__(self, *_: Any) -> None:
        self._lock.release()


def test_an_mts_write_racing_an_intents_transaction_does_not_deadlock(node, node_ns, tmp_path):  # noqa: F811
    """The intents' transaction holds the service's lock and opens the store's only once the MTS
    write has asked for the service's lock: in the order the intents take them, the MTS write waits
    holding nothing, in the other it waits holding the store and neither ever goes on."""
    store = Store.open(tmp_path / "race.db", synchronous="NORMAL")  # not closed if deadlocked: its lock is held
    grant_subnets(store, {"tenant-a": (UE, ())})
    state = rule_machinery(node)
    wanted = threading.Event()
    state.lock = NoticedLock(state.lock, wanted)  # type: ignore[assignment]
    atsss = Atsss.start(store, node.table, netns=node_ns, rules=FunctionRules(state, "atsss"))
    atsss.create_session(ADMIN, "tenant-a/ue7", session())
    mts = threading.Thread(name="mts", daemon=True, target=lambda: steer_flows(
        atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY, tenant="tenant-a"))

    def store_once_mts_waits() -> Store:  # between the intents' lock and their store transaction
        mts.start()
        assert wanted.wait(JOIN_SECONDS)
        return store

    intents = Transactions(state.exclusive, store_once_mts_waits, lambda: None)
    writer = threading.Thread(daemon=True, target=lambda: intents.change(ADMIN, state.rule_change, lambda _: None))
    writer.start()
    writer.join(JOIN_SECONDS)
    mts.join(JOIN_SECONDS)

    deadlocked = writer.is_alive() or mts.is_alive()
    assert not deadlocked, "the intents' transaction and the MTS write wait on each other"
    assert len(rules_of(atsss)) == 1
    clear(atsss)
    store.close()


# --- the node's share of the classifier for ATSSS -------------------------------------------------


def test_every_tenants_flow_filters_together_take_at_most_the_nodes_function_shapes(node):  # noqa: F811
    """Settings function_shapes {"atsss": 2}: three MTS sessions' rules of three shapes (each a prefix
    length of sourceIp; one tenant's here, the cap counting every tenant's rules alike, each tenant
    within its own 4): the third is refused naming its filter and the setting; a rule of a shape
    held still goes in. By default ATSSS may take 8."""
    state = rule_machinery(node)
    state.settings = state.settings.model_copy(update={"function_shapes": {"atsss": 2}})
    rules = FunctionRules(state, "atsss")
    wide = [session_rules(name, UE, [{"dstIp": UE, "sourceIp": f"198.18.0.0/{length}"}], SteeringMode.ACTIVE_STANDBY)
            for name, length in (("a", 24), ("b", 25), ("c", 26))]
    undo = [apply_rules(rules, {}, wide[0]), apply_rules(rules, {}, wide[1])]
    try:
        with pytest.raises(InvalidInput) as refused:
            apply_rules(rules, {}, wide[2])
        undo.append(apply_rules(rules, {}, session_rules("d", UE, [{"dstIp": UE, "sourceIp": "198.19.0.0/24"}],
                                                         SteeringMode.ACTIVE_STANDBY)))
    finally:
        for each in reversed(undo):
            each()

    assert refused.value.field == "flowFilter[0]"
    assert "function_shapes" in str(refused.value) and "(2)" in str(refused.value)
    assert Settings(auth_disabled=True).function_shapes == {"atsss": 8}


def test_a_cap_lowered_below_the_shapes_held_refuses_a_change_that_swaps_a_held_shape_for_a_new_one(node):  # noqa: F811
    """Two sessions' rules of two shapes held, the cap then lowered to 1: a rule of a held shape
    still goes in, but session a's rules rewritten to a third shape (the count staying 2, one held
    shape given up) are refused, as any new shape past the cap."""
    state = rule_machinery(node)
    state.settings = state.settings.model_copy(update={"function_shapes": {"atsss": 2}})
    rules = FunctionRules(state, "atsss")

    def of(name: str, length: int, source: str = "198.18.0.0") -> dict:
        return session_rules(name, UE, [{"dstIp": UE, "sourceIp": f"{source}/{length}"}], SteeringMode.ACTIVE_STANDBY)

    undo = [apply_rules(rules, {}, of("a", 24)), apply_rules(rules, {}, of("b", 25))]
    state.settings = state.settings.model_copy(update={"function_shapes": {"atsss": 1}})
    try:
        undo.append(apply_rules(rules, {}, of("d", 25, "198.19.0.0")))
        with pytest.raises(InvalidInput) as refused:
            undo.append(apply_rules(rules, of("a", 24), of("a", 26)))
    finally:
        for each in reversed(undo):
            each()

    assert refused.value.field == "flowFilter[0]" and "function_shapes" in str(refused.value)


@pytest.mark.parametrize("shapes, named", [({"ATSSS": 2}, "function_shapes.ATSSS"),
                                           ({"atsss": 17}, "function_shapes.atsss"),
                                           ({"upf": -1}, "function_shapes.upf")])
def test_the_function_shapes_setting_takes_the_functions_with_rules_of_their_own_and_at_most_16(shapes, named):
    """A misspelt function would lift the cap unseen, a cap past the classifier's 16 shapes means
    none: both refused naming the key. 0 leaves the function no shape."""
    with pytest.raises(ValidationError) as refused:
        Settings(auth_disabled=True, function_shapes=shapes)

    assert named in str(refused.value)
    assert Settings(auth_disabled=True, function_shapes={"atsss": 0, "upf": 16}).function_shapes == {"atsss": 0, "upf": 16}
