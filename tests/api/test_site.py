"""Site resources over a real server: alternative node groups, the data plane (status, attach,
detach, CPUs), statistics."""

from __future__ import annotations

from tests.api.problems import assert_problem
from tests.utils.intents import native_intent

ALTERNATIVES = "/api/v1/alternatives"
DATAPLANE = "/api/v1/dataplane"
GROUP = {"id": 3, "members": [{"mac": "02:00:00:00:00:09", "ip4": "10.0.0.9"}]}


def test_given_an_admin_when_a_group_is_put_listed_and_deleted_then_200_200_204(admin, tenant_a):
    put = admin.put(f"{ALTERNATIVES}/3", json=GROUP)

    assert put.status_code == 200 and put.json()["members"][0]["ip4"] == "10.0.0.9"
    assert tenant_a.get(ALTERNATIVES).json() == [put.json()]
    assert admin.delete(f"{ALTERNATIVES}/3").status_code == 204
    assert tenant_a.get(ALTERNATIVES).json() == []


def test_given_a_group_in_use_when_deleted_then_409(admin):
    admin.put(f"{ALTERNATIVES}/3", json=GROUP)
    admin.post("/api/v1/intents", json=native_intent(alternative=3))

    problem = assert_problem(admin.delete(f"{ALTERNATIVES}/3"), 409)
    assert problem["intents"] == ["video-prio"]


def test_given_a_bad_group_when_put_then_400_names_the_member_field(admin):
    group = {"id": 3, "members": [{"mac": "02:00:00:00:00"}]}

    problem = assert_problem(admin.put(f"{ALTERNATIVES}/3", json=group), 400)
    assert problem["invalid-params"][0]["name"] == "members[0].mac"


def test_given_too_many_members_when_put_then_400_says_the_limit(admin):
    group = {"id": 3, "members": [GROUP["members"][0]] * 9}

    problem = assert_problem(admin.put(f"{ALTERNATIVES}/3", json=group), 400)
    assert problem["invalid-params"][0] == {
        "name": "members",
        "reason": "List should have at most 8 items after validation, not 9",
        "allowed": "at most 8 items",
    }


def test_given_a_missing_group_when_deleted_then_404(admin):
    assert_problem(admin.delete(f"{ALTERNATIVES}/5"), 404)


def test_given_an_admin_when_attaching_and_detaching_then_200_and_204_and_status_shows_it(admin, tenant_a):
    attached = admin.post(f"{DATAPLANE}/attach", json={"interface": "eth0", "mode": "generic"})

    assert attached.status_code == 200 and attached.json() == {"interface": "eth0", "mode": "generic"}
    [view] = tenant_a.get(DATAPLANE).json()["interfaces"]
    assert (view["name"], view["mode"], view["attached"]) == ("eth0", "generic", True)
    assert admin.post(f"{DATAPLANE}/detach", json={"interface": "eth0"}).status_code == 204
    assert_problem(admin.post(f"{DATAPLANE}/detach", json={"interface": "eth0"}), 404)


def test_given_an_attached_interface_when_attached_again_then_409(admin):
    admin.post(f"{DATAPLANE}/attach", json={"interface": "eth0"})

    assert_problem(admin.post(f"{DATAPLANE}/attach", json={"interface": "eth0"}), 409)


def test_given_a_bad_attach_request_then_400_names_mode_and_interface(admin, service):
    problem = assert_problem(
        admin.post(f"{DATAPLANE}/attach", json={"interface": "a/b", "mode": "turbo"}), 400
    )

    params = {param["name"]: param for param in problem["invalid-params"]}
    assert set(params) == {"interface", "mode"}
    assert params["mode"]["allowed"] == "'native', 'generic' or 'offload'"
    assert service.calls == []


def test_given_an_admin_when_a_cpu_is_put_then_it_is_listed(admin, tenant_a):
    put = admin.put(f"{DATAPLANE}/cpus/1", json={"cpu": 1, "capacity_pps": 1_000_000})

    assert put.status_code == 200 and put.json()["capacity_pps"] == 1_000_000
    assert tenant_a.get(f"{DATAPLANE}/cpus").json()[0]["cpu"] == 1


def test_given_a_cpu_out_of_range_then_400_in_path_and_body(admin):
    assert_problem(admin.put(f"{DATAPLANE}/cpus/128", json={"cpu": 128}), 400)
    problem = assert_problem(admin.put(f"{DATAPLANE}/cpus/1", json={"cpu": 2}), 400)
    assert problem["invalid-params"][0]["name"] == "cpu"


def test_given_a_cpu_of_the_set_when_deleted_then_204_and_it_is_gone_and_a_second_delete_is_a_404(
    admin, tenant_a
):
    admin.put(f"{DATAPLANE}/cpus/1", json={"cpu": 1})

    assert admin.delete(f"{DATAPLANE}/cpus/1").status_code == 204
    assert tenant_a.get(f"{DATAPLANE}/cpus").json() == []
    problem = assert_problem(admin.delete(f"{DATAPLANE}/cpus/1"), 404)
    assert problem["detail"] == "CPU 1 is not in the CPU set"
    assert problem["invalid-params"][0]["name"] == "cpu"
    assert_problem(admin.delete(f"{DATAPLANE}/cpus/128"), 400)


def test_given_intents_when_stats_are_read_then_a_tenant_sees_its_own_and_an_admin_sees_cpus(
    admin, tenant_a, tenant_b
):
    tenant_a.post("/api/v1/intents", json=native_intent("a1"))

    assert tenant_a.get("/api/v1/stats").json() == {"intents": {"a1": {"packets": 0, "bytes": 0}}}
    assert tenant_b.get("/api/v1/stats").json() == {"intents": {}}
    assert "cpus" in admin.get("/api/v1/stats").json()
