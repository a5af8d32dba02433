"""/api/v1/tenants over a real server: admins grant, tenants read their own, errors name fields.
(The intents of these tests' fake service are not in the tenants' store: what grants do to intents
is tested through the real service, tests/tenancy.)"""

from __future__ import annotations

import pytest

from tests.api.problems import assert_problem

TENANTS = "/api/v1/tenants"
VNI_1093 = {"traffic": [{"overlay": "vxlan", "vni": 1093}]}


def test_an_admin_grants_traffic_and_the_tenant_reads_it_with_its_usage(admin, tenant_a):
    created = admin.put(f"{TENANTS}/tenant-a", json=VNI_1093)
    assert created.status_code == 201 and created.headers["location"] == f"{TENANTS}/tenant-a"
    assert admin.put(f"{TENANTS}/tenant-a", json=VNI_1093).json()["revision"] == 2
    own = tenant_a.get(f"{TENANTS}/tenant-a").json()
    assert own["spec"]["traffic"] == [
        {"interface": None, "vlan": None, "overlay": "vxlan", "vni": 1093, "teids": None, "src": None, "dst": None}
    ]
    assert own["spec"]["quotas"] == {"intents": 10000, "slices": 100, "subscriptions": 100, "streams": 4,
                                     "frer_streams": 256, "atsss_sessions": 1024,
                                     "atsss_flow_rules": 1024}
    assert own["usage"] == {"intents": 0, "slices": 0, "subscriptions": 0, "streams": 0, "frer_streams": 0,
                            "atsss_sessions": 0}
    assert "tenant-a" in [record["tenant"] for record in admin.get(TENANTS).json()]


def test_a_tenant_reads_no_other_tenants_record_and_writes_none(admin, tenant_a):
    admin.put(f"{TENANTS}/tenant-b", json=VNI_1093)
    assert_problem(tenant_a.get(f"{TENANTS}/tenant-b"), 404)
    assert_problem(tenant_a.put(f"{TENANTS}/tenant-a", json={"site": True}), 403)
    assert_problem(tenant_a.get(TENANTS), 403)


def test_without_a_record_a_tenant_owns_nothing_and_an_admins_tenant_is_site_wide(admin, tenant_a):
    own = tenant_a.get(f"{TENANTS}/tenant-a").json()
    assert (own["spec"]["site"], own["spec"]["traffic"], own["revision"]) == (False, [], 0)
    assert admin.get(f"{TENANTS}/operator").json()["spec"]["site"] is True


def test_grants_that_share_packets_with_another_tenants_are_409_naming_it(admin):
    admin.put(f"{TENANTS}/tenant-a", json=VNI_1093)
    problem = assert_problem(admin.put(f"{TENANTS}/tenant-b", json={"traffic": [{"teids": {"first": 1, "last": 9}}]}), 409)
    assert problem["tenant"] == "tenant-a" and "meets the grant 'vxlan vni 1093'" in problem["detail"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"traffic": [{"vni": 5}]}, "traffic[0].vni"),
        ({"traffic": [{}]}, "traffic[0]"),
        ({"traffic": [{"teids": {"first": 9, "last": 1}}]}, "traffic[0].teids.last"),
        ({"site": True, "traffic": [{"vlan": 5}]}, "traffic"),
        ({"quotas": {"intents": -1}}, "quotas.intents"),
    ],
)
def test_a_bad_record_is_400_naming_the_field(admin, body, field):
    problem = assert_problem(admin.put(f"{TENANTS}/tenant-a", json=body), 400)
    assert [param["name"] for param in problem["invalid-params"]] == [field]


def test_deleting_a_tenant_without_a_record_is_404(admin):
    assert_problem(admin.delete(f"{TENANTS}/nobody"), 404)
