"""/api/v1/slices over a real server: create or resize (201/200), read, list, delete, tenants."""

from __future__ import annotations

from typing import Any

from netapp.service.contract import Conflict
from tests.api.problems import assert_problem

SLICES = "/api/v1/slices"


def slice_spec(slice_id: str = "embb-1", **fields: Any) -> dict[str, Any]:
    spec = {
        "id": slice_id,
        "snssai": {"sst": 1, "sd": "00A1B2"},
        "priority_level": 10,
        "members": {"vnis": [1093], "ue_prefixes": ["10.45.0.0/16"]},
        "cpus": [1],
    }
    spec.update(fields)
    return spec


def test_given_a_new_slice_when_put_then_201_with_its_location_and_then_200_when_resized(tenant_a, service):
    first = tenant_a.put(f"{SLICES}/embb-1", json=slice_spec())
    resized = tenant_a.put(f"{SLICES}/embb-1", json=slice_spec(gbr_kbps=50_000))

    assert first.status_code == 201 and first.headers["location"] == f"{SLICES}/embb-1"
    assert first.json()["tenant"] == "tenant-a" and first.json()["spec"]["snssai"] == {
        "sst": 1,
        "sd": "00A1B2",
    }
    assert resized.status_code == 200 and "location" not in resized.headers
    assert resized.json()["spec"]["gbr_kbps"] == 50_000 and resized.json()["revision"] == 2


def test_given_slices_when_listed_then_paged_with_a_total_and_links(tenant_a):
    for number in range(3):
        tenant_a.put(f"{SLICES}/s{number}", json=slice_spec(f"s{number}"))

    response = tenant_a.get(SLICES, params={"limit": 2})

    body = response.json()
    assert [item["spec"]["id"] for item in body["items"]] == ["s0", "s1"] and body["total"] == 3
    assert 'rel="next"' in response.headers["link"] and "offset=2" in response.headers["link"]


def test_given_a_slice_when_read_and_deleted_then_200_then_204_then_404(tenant_a):
    tenant_a.put(f"{SLICES}/embb-1", json=slice_spec())

    assert tenant_a.get(f"{SLICES}/embb-1").json()["spec"]["id"] == "embb-1"
    assert tenant_a.delete(f"{SLICES}/embb-1").status_code == 204
    assert_problem(tenant_a.get(f"{SLICES}/embb-1"), 404)


def test_given_another_tenants_slice_then_it_is_not_listed_and_reads_as_404(tenant_a, tenant_b):
    tenant_a.put(f"{SLICES}/embb-1", json=slice_spec())

    assert tenant_b.get(SLICES).json()["total"] == 0
    assert_problem(tenant_b.get(f"{SLICES}/embb-1"), 404)
    assert_problem(tenant_b.delete(f"{SLICES}/embb-1"), 404)


def test_given_a_body_for_another_slice_when_put_then_400_names_id(tenant_a):
    problem = assert_problem(tenant_a.put(f"{SLICES}/embb-1", json=slice_spec("embb-2")), 400)

    assert problem["invalid-params"][0]["name"] == "id"


def test_given_a_bad_slice_when_put_then_400_names_each_field(tenant_a, service):
    spec = slice_spec(priority_level=0, snssai={"sst": 256, "sd": "XYZ"}, colour="red")

    problem = assert_problem(tenant_a.put(f"{SLICES}/embb-1", json=spec), 400)

    names = {param["name"] for param in problem["invalid-params"]}
    assert names == {"priority_level", "snssai.sst", "snssai.sd", "colour"}
    assert service.calls == []


def test_given_the_service_refuses_a_resize_then_409(tenant_a, service):
    service.fail_next(Conflict("the slice's intents collide with intent 'x'"))

    assert_problem(tenant_a.put(f"{SLICES}/embb-1", json=slice_spec()), 409)


def test_given_an_admin_when_it_names_the_tenant_then_it_reads_and_deletes_that_tenants_slice(
    tenant_a, admin
):
    tenant_a.put(f"{SLICES}/embb-1", json=slice_spec())

    assert_problem(admin.get(f"{SLICES}/embb-1"), 404)
    assert admin.get(f"{SLICES}/embb-1", params={"tenant": "tenant-a"}).json()["tenant"] == "tenant-a"
    assert admin.delete(f"{SLICES}/embb-1", params={"tenant": "tenant-a"}).status_code == 204
    assert_problem(tenant_a.get(f"{SLICES}/embb-1"), 404)
