"""Every number the API takes is bounded by what holds it: the store (SQLite: signed 64 bits), the
kernel, PFCP for bitrates. A number past it is a 400 naming the field and what is allowed, never a
500, nor a value the kernel keeps wrapped."""

from __future__ import annotations

import pytest

from netapp.intents.models import MAX_U32
from tests.api.problems import assert_problem, invalid_param

INTENTS = "/api/v1/intents"
CPU_0 = "/api/v1/dataplane/cpus/0"


@pytest.mark.parametrize("path", [INTENTS, "/api/v1/slices"])
def test_given_an_offset_past_what_the_store_holds_then_400_names_it(tenant_a, path):
    assert tenant_a.get(path, params={"offset": (1 << 63) - 1}).status_code == 200

    param = invalid_param(assert_problem(tenant_a.get(path, params={"offset": 1 << 63}), 400))

    assert param["name"] == "offset" and param["allowed"] == f"<= {(1 << 63) - 1}"


@pytest.mark.parametrize(
    "field, most, refused",
    [
        ("capacity_pps", MAX_U32, [MAX_U32 + 1, (1 << 64) + 5]),
        ("queue_size", 16384, [16385, 1 << 20]),
    ],
)
def test_given_a_cpu_number_the_kernel_cannot_hold_then_400_names_it(admin, field, most, refused):
    assert admin.put(CPU_0, json={"cpu": 0, field: most}).status_code == 200

    for value in refused:
        param = invalid_param(assert_problem(admin.put(CPU_0, json={"cpu": 0, field: value}), 400))

        assert (param["name"], param["allowed"]) == (field, f"<= {most}")




@pytest.mark.parametrize("field", ["gbr_kbps", "mbr_kbps"])
def test_given_a_bitrate_past_what_pfcp_holds_then_400_names_it(tenant_a, field):
    spec = {"id": "s1", "snssai": {"sst": 1}, "priority_level": 1, "members": {}}
    assert tenant_a.put("/api/v1/slices/s1", json={**spec, field: (1 << 40) - 1}).status_code in (200, 201)

    for value in (1 << 40, 1 << 63):
        response = tenant_a.put("/api/v1/slices/s1", json={**spec, field: value})

        param = invalid_param(assert_problem(response, 400))
        assert (param["name"], param["allowed"]) == (field, f"<= {(1 << 40) - 1}")
