"""Overlap warnings through a real uvicorn over the real service (FakeDpp underneath): in the answers
of creates (single and batch), replaces and dry runs, as the OpenAPI document says; and from
`netapp intents apply` (with --dry-run too), one line each on stderr."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

import httpx
import jsonschema
import pytest
from typer.testing import CliRunner

from netapp.api.main import create_app
from netapp.cli.main import app as cli
from netapp.core.config import Settings
from netapp.service.contract import Principal, Scope
from tests.api.conftest import token_of
from tests.api.server import ServerThread
from tests.api.test_openapi import COMMITTED
from tests.utils.intents import native_intent
from tests.utils.service import fake_service

INTENTS = "/api/v1/intents"
OPERATOR = Principal("operator", frozenset({Scope.ADMIN}))
FLOW = native_intent("flow", match={"overlay": "vxlan", "vni": 1093, "teid": 7}, priority=200)
WIDE = native_intent("wide", match={"dst": "10.0.0.0/24"}, action={"type": "drop"}, priority=300)
FLOW_WARNING = {
    "kind": "overlap",
    "intent_a": "wide",
    "intent_b": "flow",
    "shared": "packets to 10.0.0.0/24 in vxlan VNI 1093 in GTP-U TEID 0x00000007",
    "winner": "wide",
    "reason": "priority 300 over 200",
    "count": None,
}


@pytest.fixture
def served(tmp_path, tokens_path) -> Iterator[str]:
    service = fake_service(tmp_path)
    try:
        with ServerThread(create_app(Settings(tokens_file=tokens_path), service)) as server:
            yield server.url
    finally:
        service.close()


@pytest.fixture
def client(served) -> Iterator[Callable[[str], httpx.Client]]:
    opened: list[httpx.Client] = []

    def make(caller: str) -> httpx.Client:
        opened.append(httpx.Client(base_url=served, headers={"Authorization": f"Bearer {token_of(caller)}"}))
        return opened[-1]

    yield make
    for each in opened:
        each.close()


def assert_answer_is(response: httpx.Response, status: int, schema: str) -> dict:
    """The status, and a body the committed OpenAPI document's schema accepts."""
    assert response.status_code == status, response.text
    document = json.loads(COMMITTED.read_text())
    resolver = {"$ref": f"#/components/schemas/{schema}", "components": document["components"]}
    jsonschema.validate(response.json(), resolver)
    return response.json()


def test_a_create_answers_the_intents_it_overlaps_and_who_wins(client):
    tenant = client("tenant-a")
    assert assert_answer_is(tenant.post(INTENTS, json=FLOW), 201, "IntentResult")["warnings"] == []

    body = assert_answer_is(tenant.post(INTENTS, json=WIDE), 201, "IntentResult")

    assert body["intent"]["id"] == "wide" and body["warnings"] == [FLOW_WARNING]
    assert tenant.get(f"{INTENTS}/wide").json().keys() == body.keys() - {"warnings"}


def test_a_batch_a_replace_and_a_dry_run_answer_them_too(client):
    tenant = client("tenant-a")
    both = {"intents": [FLOW, WIDE]}
    batch = assert_answer_is(tenant.post(f"{INTENTS}/batch", json=both), 201, "IntentBatchRecords")
    assert [w["intent_b"] for w in batch["warnings"]] == ["wide"]  # the pair, once: flow's view of it

    lower = {**WIDE, "priority": 100}
    dry = tenant.put(f"{INTENTS}/wide", params={"dry_run": "true"}, json=lower)
    report = assert_answer_is(dry, 200, "DryRunReport")
    assert report["warnings"] == [{**FLOW_WARNING, "winner": "flow", "reason": "priority 200 over 100"}]

    replaced = assert_answer_is(tenant.put(f"{INTENTS}/wide", json=lower), 200, "IntentResult")
    assert replaced["revision"] == 2 and replaced["warnings"] == report["warnings"]


def test_another_tenant_sees_an_intent_of_another_tenant_and_only_its_own_packets(client):
    client("tenant-a").post(INTENTS, json=FLOW).raise_for_status()

    body = client("tenant-b").post(INTENTS, json=WIDE).json()

    assert body["warnings"] == [
        {**FLOW_WARNING, "intent_b": "an intent of another tenant", "shared": "some packets to 10.0.0.0/24"}
    ]


# --- the CLI ------------------------------------------------------------------------------------


def apply(served: str, path: Path, *options: str) -> tuple[int, str, list[str]]:
    """`netapp intents apply -f PATH` as tenant-a: exit code, stdout, stderr lines."""
    env = {"NETAPP_URL": served, "NETAPP_TOKEN": token_of("tenant-a")}
    result = CliRunner().invoke(cli, ["intents", "apply", "-f", str(path), *options], env=env)
    return result.exit_code, result.stdout, result.stderr.splitlines()


def test_apply_prints_each_warning_on_one_line_of_stderr_and_so_does_a_dry_run(served, tmp_path):
    flows = tmp_path / "flows.json"
    flows.write_text(json.dumps([FLOW, {**FLOW, "id": "flow-2", "match": {**FLOW["match"], "teid": 8}}]))
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps(WIDE))
    line = (
        "netapp: warning: overlap: wide and flow both match packets to 10.0.0.0/24 in vxlan VNI 1093 "
        "in GTP-U TEID 0x00000007; wide gets them (priority 300 over 200)"
    )

    assert apply(served, flows) == (0, "created flow\ncreated flow-2\n", [])
    code, out, dry = apply(served, wide, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["applied"] is False
    assert dry == [line, line.replace("flow both", "flow-2 both").replace("TEID 0x00000007", "TEID 0x00000008")]
    assert apply(served, wide) == (0, "created wide\n", dry)
