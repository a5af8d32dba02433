"""How CLI commands reach the NetApp: its REST API, at an address and with a token taken from
options, the environment or the client file (netapp.cli.client_config). Every failure becomes one
actionable line (see netapp.cli.errors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Optional

import httpx

from netapp.cli.client_config import TOKEN_ENV, Address, resolve_address
from netapp.cli.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAILED, fail

TIMEOUT_S = 10.0


@dataclass
class Api:
    """A REST client for one NetApp."""

    url: str
    token: Optional[str]
    verify: Any = True
    address: Optional[Address] = None  # where url and token came from, when resolved from options

    @classmethod
    def from_options(cls, url: Optional[str], token: Optional[str]) -> "Api":
        address = resolve_address(url, token)
        return cls(url=address.url, token=address.token, verify=address.verify, address=address)

    def _headers(self, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
        headers = {"Accept": "application/json, application/problem+json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra or {})
        return headers

    def request(self, method: str, path: str, *, json: Any = None, params: Optional[dict] = None,
                headers: Optional[dict[str, str]] = None, answers: Collection[int] = ()) -> httpx.Response:
        """Send a request; a transport failure or an error status (other than `answers`) ends the
        command with one line."""
        try:
            return self.send(method, path, json=json, params=params, headers=headers, answers=answers)
        except ApiError as exc:
            fail(exc.line, exc.exit_code)

    def send(self, method: str, path: str, *, json: Any = None, params: Optional[dict] = None,
             headers: Optional[dict[str, str]] = None, answers: Collection[int] = ()) -> httpx.Response:
        """As `request`, but a failure raises ApiError: for callers that carry on (stats --watch)."""
        try:
            response = httpx.request(method, self.url + path, json=json, params=params,
                                     headers=self._headers(headers), timeout=TIMEOUT_S, verify=self.verify)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the NetApp at {self.url} ({exc.__class__.__name__}: {exc}); "
                           f"{self._unreachable_hint()}", None) from exc
        if response.status_code >= 400 and response.status_code not in answers:
            raise ApiError(problem_line(method, path, response) + self._token_note(response.status_code),
                           response.status_code)
        return response

    def _unreachable_hint(self) -> str:
        return (self.address or Address(self.url, self.token, self.verify)).unreachable_hint()

    def _token_note(self, status: int) -> str:
        """Which token was refused, when it came from the client file."""
        if status == 401 and self.address is not None and self.address.token_from_file:
            return f"; the token is the one in {self.address.file}"
        return ""

    def exists(self, path: str) -> bool:
        """Whether a GET of `path` succeeds; a 404 is an answer here, not a failure."""
        try:
            response = httpx.get(self.url + path, headers=self._headers(), timeout=TIMEOUT_S, verify=self.verify)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()


class ApiError(Exception):
    """A request that failed: `line` says how; `status` is None when the NetApp was not reached."""

    def __init__(self, line: str, status: Optional[int]):
        super().__init__(line)
        self.line = line
        self.status = status

    @property
    def transient(self) -> bool:
        """Whether asking again later may succeed: the NetApp is away, restarting or failing."""
        return self.status is None or self.status >= 500

    @property
    def exit_code(self) -> int:
        if self.status is None:
            return EXIT_ENVIRONMENT
        return EXIT_BAD_INPUT if self.status in (400, 404, 409, 422) else EXIT_FAILED


def problem_line(method: str, path: str, response: httpx.Response) -> str:
    """An RFC 7807 problem (or any error body) as one line: status, detail, the fields at fault."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    detail = str(body.get("detail") or body.get("title") or response.reason_phrase)
    params = [param for param in body.get("invalid-params") or [] if isinstance(param, dict)]
    fields = "; ".join(words for words in (_param_words(param, detail) for param in params) if words)
    hint = {401: f" (give a token with --token or {TOKEN_ENV})", 403: " (this token lacks the scope)"}
    if params:  # a 403 naming a field refuses what the body asks, whatever the token's scopes
        hint.pop(403)
    return (f"{method} {path}: {response.status_code} {detail}"
            + (f" [{fields}]" if fields else "") + hint.get(response.status_code, ""))


def _param_words(param: dict, detail: str) -> str:
    """What an entry of invalid-params adds to the detail: nothing it says already (the detail of
    most problems is made of their entries), and what is allowed."""
    said = f"{param.get('name')}: {param.get('reason')}"
    if said in detail or str(param.get("reason")) in detail:
        said = ""
    allowed = param.get("allowed")
    if allowed and f"allowed: {allowed}" not in detail:
        said = f"{said or param.get('name')} (allowed: {allowed})"
    return said
