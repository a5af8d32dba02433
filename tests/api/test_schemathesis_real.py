"""The OpenAPI document run against the real NetApp: a real uvicorn over a started NetAppService,
its SQLite store in a temporary directory, the XDP program with its maps pinned under an instance
of this module only, its telemetry running. As admin, over every operation, whatever schemathesis
sends: no 5xx, and every answer conforms to the document.

Random values alone would rarely meet the testbed, so a share of the examples is aimed at it: the
interface of attach and detach is the veth pair of a namespace this module makes (the site's
namespace), a subscription's callback is a listener this module starts, and intents, slices,
alternative groups, CPUs and tenants take ids from a few fixed ones, so that later examples
replace, read and delete what earlier ones made.

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import httpx
import pytest
from hypothesis import strategies as st

from netapp.api.main import create_app
from netapp.core.config import InterfaceSetting, Settings, SubscriptionSettings, TelemetrySettings
from netapp.core.netns import entered
from netapp.telemetry.runtime import Telemetry
from tests.api.conftest import token_of
from tests.api.openapi_run import admin_schema, examples, excluded_checks
from tests.api.server import ServerThread
from tests.utils.callbacks import CallbackReceiver
from tests.utils.intents import native_intent
from tests.utils.kernel import require_kernel, veth_namespace
from tests.utils.maps import map_rules, pinned_instance, unlike_the_store

# At least this many per operation (hypothesis stops sooner only for an operation with fewer
# distinct requests, such as one without parameters). 50 keeps the whole suite inside CI's time
# on two shared CPUs; DPP_REAL_EXAMPLES asks a deeper run of it (e.g. 2000 before a release).
EXAMPLES_PER_OPERATION = int(os.environ.get("DPP_REAL_EXAMPLES", "50"))

VETH, PEER = "dppst0", "dppst1"
# Stands for the listener's URL in generated bodies; the test puts the real one in.
LISTENER = "http://listener.invalid/notify"
INTENT_IDS = ("st-a", "st-b", "st-c")
SLICE_IDS = ("st-slice", "st-other")
TENANTS = ("operator", "tenant-a")  # the admin's own tenant, and another
CPUS = tuple(range(min(2, os.cpu_count() or 1)))
GROUP_IDS = (0, 1)
# Small, so that slices and batches meet the data plane's capacity.
MAX_RULES = 32
TELEMETRY_INTERVAL_S = 0.2

pytestmark = pytest.mark.slow

# MEC 015 BWM and MEC 011's DNS rules, lifecycle and subscriptions run with ETSI's document as the
# schema in tests/mec (test_bwm_etsi.py, test_app_support_etsi.py): not again here at 500 examples
# an operation, which would add minutes to the suite for the same requests.
schema = admin_schema().exclude(path_regex="^/(bwm/|mec_app_support/v1/applications/[^/]+/(dns_rules|subscriptions|confirm_))")


@dataclass(frozen=True)
class Real:
    url: str
    receiver: CallbackReceiver
    admin: httpx.Client


@pytest.fixture(scope="module")
def instance() -> Iterator[str]:
    """A pinned instance of this module only; its pins and links go whatever happened."""
    require_kernel()
    with pinned_instance("st") as name:
        yield name


@pytest.fixture(scope="module")
def namespace(instance: str) -> Iterator[str]:
    with veth_namespace("st", VETH, PEER) as name:
        yield name


@pytest.fixture(scope="module")
def receiver() -> Iterator[CallbackReceiver]:
    with CallbackReceiver() as listening:
        yield listening


@pytest.fixture(scope="module")
def real(instance, namespace, receiver, tokens_path, tmp_path_factory) -> Iterator[Real]:
    """The REST API over a started NetAppService and its running telemetry."""
    from netapp.service.service import NetAppService

    settings = Settings(
        state_dir=tmp_path_factory.mktemp("state"),
        instance=instance,
        max_rules=MAX_RULES,
        tokens_file=tokens_path,
        netns=namespace,
        interfaces=[InterfaceSetting(name=VETH, mode="generic")],
        telemetry=TelemetrySettings(
            interval_s=TELEMETRY_INTERVAL_S,
            subscriptions=SubscriptionSettings(
                timeout_ms=1000,
                max_retries=1,
                callback_allow=["127.0.0.1/32"],  # the test's listener
            ),
        ),
    )
    service = NetAppService(settings)
    try:
        service.start()
        telemetry = Telemetry.from_settings(settings, service)
        assert telemetry is not None
        telemetry.start()
        # A stream would run until its client goes: with the streams' hub stopped, one answers its
        # `closed` event at once, once the route has checked the caller, the filter and the room.
        telemetry.streams.stop()
        try:
            with ServerThread(create_app(settings, service, telemetry)) as server:
                with admin_client(server.url) as admin:
                    seed_site(admin)
                    yield Real(server.url, receiver, admin)
        finally:
            telemetry.stop()
    finally:
        service.close()


def admin_client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token_of('admin')}"}, timeout=30)


def seed_site(admin: httpx.Client) -> None:
    """The CPUs and alternative groups the aimed intents steer and forward to."""
    for cpu in CPUS:
        admin.put(f"/api/v1/dataplane/cpus/{cpu}", json={"cpu": cpu}).raise_for_status()
    for group in GROUP_IDS:
        member = {"mac": f"02:00:00:00:00:0{group + 1}", "ip4": f"10.0.0.{group + 1}", "interface": PEER}
        admin.put(f"/api/v1/alternatives/{group}", json={"id": group, "members": [member]}).raise_for_status()


def restore_attachments(admin: httpx.Client, case: Any, status: int) -> None:
    """Undo what an attach or a detach did, so that every example meets the testbed as the last
    one did: VETH attached, PEER not."""
    if case.path == "/api/v1/dataplane/attach" and status == 200:
        admin.post("/api/v1/dataplane/detach", json={"interface": case.body["interface"]}).raise_for_status()
    if case.path == "/api/v1/dataplane/detach" and status == 204:
        body = {"interface": case.body["interface"], "mode": "generic"}
        admin.post("/api/v1/dataplane/attach", json=body).raise_for_status()


@schema.hook
def flatmap_case(context: Any, case: Any) -> st.SearchStrategy:
    """The generated case, or the same aimed at the testbed (positive cases only: a negative one
    must stay invalid)."""
    meta = case.meta
    aimed = _aimed(case)
    if meta is None or not meta.generation.mode.is_positive or aimed is None:
        return st.just(case)
    return st.one_of(st.just(case), aimed)


def _aimed(case: Any) -> Optional[st.SearchStrategy]:
    """Strategy of `case` aimed at the testbed; None when there is nothing to aim at."""
    path, body = case.path, case.body if isinstance(case.body, dict) else None
    if path in ("/api/v1/intents", "/api/v1/intents/{intent_id}") and body is not None:
        # JSON Schema cannot say which fields need each other: most generated intents are refused.
        return intents().map(lambda intent: _aim(case, intent["id"], intent))
    if path == "/api/v1/slices/{slice_id}" and body is not None:
        return slices().map(lambda spec: _aim(case, spec["id"], spec))
    if path == "/api/v1/intents/batch" and body is not None:
        batches = st.lists(intents(), min_size=1, max_size=4)
        return batches.map(lambda batch: _aim(case, None, {"intents": batch}))
    targets = _TARGETS.get(path)
    if targets is None:
        return None
    return st.sampled_from(targets).map(lambda target: _aim(case, target, body))


_TARGETS: dict[str, tuple[Any, ...]] = {
    "/api/v1/intents/{intent_id}": INTENT_IDS,
    "/api/v1/slices/{slice_id}": SLICE_IDS,
    "/api/v1/tenants/{tenant}": TENANTS,
    "/api/v1/alternatives/{group_id}": GROUP_IDS,
    "/api/v1/dataplane/cpus/{cpu}": CPUS,
    "/api/v1/dataplane/attach": (VETH, PEER),
    "/api/v1/dataplane/detach": (VETH, PEER),
    "/api/v1/subscriptions": (LISTENER,),
}


def _aim(case: Any, target: Any, body: Optional[dict[str, Any]]) -> Any:
    """`case` with `body`, and its path parameter and the body's id, cpu, interface or callback
    set to `target` (when not None)."""
    if target is not None:
        case.path_parameters = {name: target for name in case.path_parameters}
        if body is not None:
            body = {**body, **{field: target for field in _AIMED_FIELDS if field in body}}
    if body is not None:
        case.body = body
    return case


_AIMED_FIELDS = ("id", "cpu", "interface", "callbackReference")


@st.composite
def intents(draw: st.DrawFn) -> dict[str, Any]:
    """A native intent the testbed can compile, over a few values of each field so that intents
    meet (collisions, replacements) and every kind of action reaches the maps."""
    match: dict[str, Any] = {}
    if draw(st.booleans()):
        match["interface"] = draw(st.sampled_from((VETH, PEER)))
    if draw(st.booleans()):
        match.update(overlay="vxlan", vni=draw(st.integers(1, 3)))
    if draw(st.booleans()):
        match["teid"] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        match["dst"] = draw(st.sampled_from(("10.0.0.0/8", "10.1.0.0/16", "2001:db8::/32")))
    if draw(st.booleans()):
        match.update(protocol="udp", dst_port=draw(st.integers(5000, 5002)))
    action = draw(
        st.sampled_from(
            (
                {"type": "pass"},
                {"type": "drop"},
                *({"type": "steer", "cpu": cpu} for cpu in CPUS),
                *({"type": "forward", "alternative": group} for group in GROUP_IDS),
                {"type": "redirect", "interface": PEER},
            )
        )
    )
    intent_id = draw(st.sampled_from(INTENT_IDS))
    return native_intent(intent_id, match=match, action=action, priority=draw(st.integers(0, 2)))


@st.composite
def slices(draw: st.DrawFn) -> dict[str, Any]:
    """A slice the testbed can install, up to more members than the data plane has room for."""
    first, beyond = draw(st.integers(1, MAX_RULES)), draw(st.integers(1, MAX_RULES))
    return {
        "id": draw(st.sampled_from(SLICE_IDS)),
        "snssai": {"sst": draw(st.integers(1, 3))},
        "priority_level": draw(st.integers(1, 10)),
        "members": {
            "vnis": draw(st.lists(st.integers(1, 8), max_size=4, unique=True)),
            "teids": list(range(first, MAX_RULES + beyond)),
        },
        "cpus": draw(st.lists(st.sampled_from(CPUS), unique=True)),
    }


# A reload loads the program on each call: 500 of them took 150 s with the machine's two CPUs
# shared, more than the suite's 120 s per test. A deeper run (DPP_REAL_EXAMPLES) needs the room.
@pytest.mark.timeout(600)
@schema.parametrize()
@examples(EXAMPLES_PER_OPERATION)
def test_every_operation_of_the_real_service_answers_without_5xx(case, real):
    if isinstance(case.body, dict) and case.body.get("callbackReference") == LISTENER:
        case.body = {**case.body, "callbackReference": real.receiver.url}
    response = case.call_and_validate(base_url=real.url, excluded_checks=excluded_checks(case.path))
    restore_attachments(real.admin, case, response.status_code)


# After the examples (pytest runs a module's tests in order), on the service they left behind.


def test_after_the_examples_the_service_is_ready_and_the_kernels_maps_hold_the_store(
    real, instance, namespace
):
    ready = real.admin.get("/readyz")
    page = real.admin.get("/api/v1/intents", params={"limit": MAX_RULES}).json()
    status = real.admin.get("/api/v1/dataplane").json()

    assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text
    assert page["total"] == len(page["items"])
    with entered(namespace):
        interfaces = {name: index for index, name in socket.if_nameindex()}
    assert unlike_the_store(map_rules(instance), page["items"], interfaces) == []
    assert status["reconciled"] is True and status["not_installed"] == {}


def test_after_the_examples_a_subscription_is_notified_at_the_listener_signed(real):
    body = {
        "subscriptionType": "TelemetryNotificationSubscription",
        "callbackReference": real.receiver.url,
        "period": TELEMETRY_INTERVAL_S,
    }
    created = real.admin.post("/api/v1/subscriptions", json=body)
    assert created.status_code == 201, created.text

    [notification, *_] = real.receiver.wait_for(1, subscription=created.json()["id"])

    assert notification.verifies(created.json()["secret"])

