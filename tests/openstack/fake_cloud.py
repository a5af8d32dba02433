"""A recorded OpenStack on loopback: Keystone v3, Nova 2.1, Glance v2 and Neutron v2.0 over real HTTP.

No OpenStack runs here. The responses are the documents in recordings/ (written from the API
references' examples, not captured from a live cloud): identity.json holds the token, catalog and
version documents, a scenario file (met.json, unmet.json) the servers, flavors, images, networks,
subnets, ports and security groups. Writes change the scenario's documents as the services would,
with their refusals (Glance: JSON-patch only, string properties, owners only; Neutron: no port
security off while security groups remain, no second rule equal to one a group has), so a second
run sees the first one's changes. Every request is recorded for the tests.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

import yaml

RECORDINGS = Path(__file__).resolve().parent / "recordings"
READS = frozenset({"GET", "HEAD"})
TOKEN = "gAAAAABrecorded-token-for-the-fake-cloud"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


class FakeCloud:
    def __init__(self, scenario: str) -> None:
        self.identity = json.loads((RECORDINGS / "identity.json").read_text())
        self.state = json.loads((RECORDINGS / f"{scenario}.json").read_text())
        self.requests: list[Request] = []
        self.unknown: list[Request] = []  # requests no route answers: a test fails on any
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.base = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeCloud":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    @property
    def writes(self) -> list[Request]:
        """The requests that change something (a token is not a change)."""
        return [r for r in self.requests if r.method not in READS and r.path != "/identity/v3/auth/tokens"]

    def clouds_yaml(self, path: Path, password: Optional[str] = None) -> Path:
        user, project = self.identity["user"], self.identity["project"]
        auth = {
            "auth_url": f"{self.base}/identity/v3",
            "username": user["name"],
            "password": user["password"] if password is None else password,
            "project_name": project["name"],
            "user_domain_name": user["domain"],
            "project_domain_name": project["domain"],
        }
        cloud = {"auth": auth, "auth_type": "password", "region_name": "RegionOne", "identity_api_version": 3}
        path.write_text(yaml.safe_dump({"clouds": {"edge": cloud}}))
        return path

    def find(self, kind: str, key: str, value: str) -> Optional[dict[str, Any]]:
        return next((doc for doc in self.state[kind] if doc.get(key) == value), None)

    # --- the services -------------------------------------------------------------------------

    def answer(self, request: Request) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.requests.append(request)
            for method, pattern, route in self._routes():
                match = re.fullmatch(pattern, request.path.rstrip("/") or "/")
                if method == request.method and match:
                    return route(request, *match.groups())
            self.unknown.append(request)
            return 404, {}, {"itemNotFound": {"code": 404, "message": f"no route for {request.path}"}}

    def _routes(self) -> list[tuple[str, str, Callable[..., tuple[int, dict[str, str], Any]]]]:
        return [
            ("GET", r"/(identity|identity/v3|compute|compute/v2\.1|image|network)", self._version),
            ("POST", r"/identity/v3/auth/tokens", self._token),
            ("GET", r"/compute/v2\.1/servers/detail", self._server_list),
            ("GET", r"/compute/v2\.1/servers/([^/]+)", self._server),
            ("GET", r"/compute/v2\.1/flavors/detail", self._flavor_list),
            ("GET", r"/compute/v2\.1/flavors/([^/]+)/os-extra_specs", self._extra_specs),
            ("POST", r"/compute/v2\.1/flavors/([^/]+)/os-extra_specs", self._set_extra_specs),
            ("GET", r"/compute/v2\.1/flavors/([^/]+)", self._flavor),
            ("POST", r"/compute/v2\.1/flavors", self._create_flavor),
            ("GET", r"/image/v2/images", self._image_list),
            ("GET", r"/image/v2/images/([^/]+)", self._image),
            ("PATCH", r"/image/v2/images/([^/]+)", self._patch_image),
            ("GET", r"/network/v2\.0/ports", self._port_list),
            ("GET", r"/network/v2\.0/ports/([^/]+)", self._port),
            ("PUT", r"/network/v2\.0/ports/([^/]+)", self._update_port),
            ("GET", r"/network/v2\.0/networks/([^/]+)", self._network),
            ("GET", r"/network/v2\.0/subnets/([^/]+)", self._subnet),
            ("GET", r"/network/v2\.0/security-groups/([^/]+)", self._security_group),
            ("POST", r"/network/v2\.0/security-group-rules", self._create_security_group_rule),
        ]

    def _rendered(self, document: Any) -> Any:
        return json.loads(json.dumps(document).replace("{base}", self.base))

    def _version(self, request: Request, service: str) -> tuple[int, dict[str, str], Any]:
        return 200, {}, self._rendered(self.identity["versions"]["/" + service])

    def _token(self, request: Request) -> tuple[int, dict[str, str], Any]:
        password = request.body["auth"]["identity"]["password"]["user"]
        user = self.identity["user"]
        if password.get("name") != user["name"] or password.get("password") != user["password"]:
            return 401, {}, self.identity["unauthorized"]
        return 201, {"X-Subject-Token": TOKEN}, self._rendered(self.identity["token"])

    def _not_found(self, kind: str, key: str) -> tuple[int, dict[str, str], Any]:
        return 404, {}, {"itemNotFound": {"code": 404, "message": f"{kind} {key} could not be found."}}

    def _server_list(self, request: Request) -> tuple[int, dict[str, str], Any]:
        name = request.query.get("name", [None])[0]
        servers = [doc for doc in self.state["servers"] if name is None or doc["name"] == name]
        return 200, {}, {"servers": self._rendered(servers)}

    def _server(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        server = self.find("servers", "id", key)
        return (200, {}, {"server": self._rendered(server)}) if server else self._not_found("Instance", key)

    def _flavor_list(self, request: Request) -> tuple[int, dict[str, str], Any]:
        return 200, {}, {"flavors": self._rendered(self.state["flavors"])}

    def _flavor(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        flavor = self.find("flavors", "id", key)
        return (200, {}, {"flavor": self._rendered(flavor)}) if flavor else self._not_found("Flavor", key)

    def _extra_specs(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        flavor = self.find("flavors", "id", key)
        return (200, {}, {"extra_specs": dict(flavor["extra_specs"])}) if flavor else self._not_found("Flavor", key)

    def _set_extra_specs(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        flavor = self.find("flavors", "id", key)
        if flavor is None:
            return self._not_found("Flavor", key)
        specs = request.body["extra_specs"]
        if not all(isinstance(value, str) for value in specs.values()):
            return 400, {}, {"badRequest": {"code": 400, "message": "extra spec values must be strings"}}
        flavor["extra_specs"].update(specs)
        return 200, {}, {"extra_specs": specs}

    def _create_flavor(self, request: Request) -> tuple[int, dict[str, str], Any]:
        wanted = request.body["flavor"]
        if self.find("flavors", "name", wanted["name"]):
            return 409, {}, {"conflictingRequest": {"code": 409, "message": f"Flavor with name {wanted['name']} already exists."}}
        flavor = copy.deepcopy(self.state["flavors"][0])
        flavor.update(id=str(uuid.uuid4()), name=wanted["name"], vcpus=wanted["vcpus"], ram=wanted["ram"],
                      disk=wanted["disk"], extra_specs={})
        flavor["links"] = [{"rel": "self", "href": f"{{base}}/compute/v2.1/flavors/{flavor['id']}"}]
        self.state["flavors"].append(flavor)
        return 200, {}, {"flavor": self._rendered(flavor)}

    def _image_list(self, request: Request) -> tuple[int, dict[str, str], Any]:
        name = request.query.get("name", [None])[0]
        images = [doc for doc in self.state["images"] if name is None or doc["name"] == name]
        return 200, {}, {"images": images, "schema": "/v2/schemas/images", "first": "/v2/images"}

    def _image(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        image = self.find("images", "id", key)
        return (200, {}, image) if image else (404, {}, {"message": f"No image found with ID {key}"})

    def _patch_image(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        image = self.find("images", "id", key)
        if image is None:
            return 404, {}, {"message": f"No image found with ID {key}"}
        if image["owner"] != self.identity["project"]["id"]:  # Glance's default policy: owners modify
            return 403, {}, {"message": "You are not authorized to complete modify_image action."}
        if request.body is None or not isinstance(request.body, list):
            return 415, {}, {"message": "Unsupported Content-Type: a JSON patch is required"}
        for op in request.body:
            name = op["path"].lstrip("/")
            if op["op"] == "replace" and name not in image:
                return 409, {}, {"message": f"Property {name} does not exist."}
            if op["op"] in ("add", "replace"):
                if not isinstance(op["value"], str):
                    return 400, {}, {"message": f"Provided object does not match schema 'image': {op['value']!r} is not of type 'string'"}
                image[name] = op["value"]
            elif op["op"] == "remove":
                image.pop(name, None)
        return 200, {}, image

    def _port_list(self, request: Request) -> tuple[int, dict[str, str], Any]:
        filters = {key: values[0] for key, values in request.query.items() if key in ("device_id", "name", "network_id")}
        ports = [doc for doc in self.state["ports"] if all(doc.get(k) == v for k, v in filters.items())]
        return 200, {}, {"ports": ports}

    def _port(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        port = self.find("ports", "id", key)
        return (200, {}, {"port": port}) if port else self._neutron_not_found("Port", key)

    def _update_port(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        port = self.find("ports", "id", key)
        if port is None:
            return self._neutron_not_found("Port", key)
        wanted = {**port, **request.body["port"]}
        if wanted["port_security_enabled"] is False and wanted["security_groups"]:
            message = (
                f"Port {key} has security group associated. Cannot disable port security or ip address "
                "until security group is removed."
            )
            return 409, {}, {"NeutronError": {"type": "PortSecurityPortHasSecurityGroup", "message": message, "detail": ""}}
        port.update(request.body["port"])
        port["revision_number"] += 1
        return 200, {}, {"port": port}

    def _network(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        network = self.find("networks", "id", key)
        return (200, {}, {"network": network}) if network else self._neutron_not_found("Network", key)

    def _subnet(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        subnet = self.find("subnets", "id", key)
        return (200, {}, {"subnet": subnet}) if subnet else self._neutron_not_found("Subnet", key)

    def _security_group(self, request: Request, key: str) -> tuple[int, dict[str, str], Any]:
        group = self.find("security_groups", "id", key)
        return (200, {}, {"security_group": group}) if group else self._neutron_not_found("SecurityGroup", key)

    def _create_security_group_rule(self, request: Request) -> tuple[int, dict[str, str], Any]:
        """Neutron's rule create: a rule equal to one the group has is a 409 SecurityGroupRuleExists."""
        wanted = request.body["security_group_rule"]
        group = self.find("security_groups", "id", wanted["security_group_id"])
        if group is None:
            return self._neutron_not_found("SecurityGroup", wanted["security_group_id"])
        rule = {
            "id": str(uuid.uuid4()), "protocol": None, "port_range_min": None, "port_range_max": None,
            "remote_ip_prefix": None, "remote_group_id": None, "description": "", **wanted,
        }  # fmt: skip
        fields = ("direction", "ethertype", "protocol", "port_range_min", "port_range_max", "remote_ip_prefix", "remote_group_id")
        for existing in group["security_group_rules"]:
            if all(existing.get(name) == rule.get(name) for name in fields):
                message = f"Security group rule already exists. Rule id is {existing['id']}."
                return 409, {}, {"NeutronError": {"type": "SecurityGroupRuleExists", "message": message, "detail": ""}}
        group["security_group_rules"].append(rule)
        return 201, {}, {"security_group_rule": rule}

    def _neutron_not_found(self, kind: str, key: str) -> tuple[int, dict[str, str], Any]:
        message = f"{kind} {key} could not be found."
        return 404, {}, {"NeutronError": {"type": f"{kind}NotFound", "message": message, "detail": ""}}


def _handler(cloud: FakeCloud) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            if self.command == "PATCH" and self.headers.get("Content-Type") != "application/openstack-images-v2.1-json-patch":
                body = None  # Glance takes a JSON patch only in its own media type
            request = Request(self.command, url.path, parse_qs(url.query), body)
            status, headers, document = cloud.answer(request)
            payload = json.dumps(document).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # the tests read cloud.requests
            pass

    return Handler
