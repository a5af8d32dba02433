"""The client file: where `netapp` commands find the NetApp's URL, a token and a CA bundle when
neither an option nor the environment gives them. `netapp demo` writes one for its API and removes
it when it ends; an operator may write one by hand.

    # $NETAPP_CLIENT_CONFIG, else $XDG_CONFIG_HOME/dpp-netapp/client.yaml, else ~/.config/dpp-netapp/client.yaml
    url: http://127.0.0.1:8080
    token: dpp_...                 # optional
    ca: /etc/dpp-netapp/ca.pem     # optional: a CA bundle to verify a TLS server with
    written_by: netapp demo        # optional: who wrote it, named when its URL does not answer

Each value is taken from an option first (--url, --token), then the environment (NETAPP_URL,
NETAPP_TOKEN, NETAPP_CA), then the file. The file's token and CA bundle belong to the file's URL:
a command sent to another URL (an option or the environment named one) does not carry them. The
file holds a secret: it is written readable by its owner only, and one others may read is warned of.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from netapp.cli.errors import EXIT_BAD_INPUT, fail, warn
from netapp.core.files import write_private

URL_ENV = "NETAPP_URL"
TOKEN_ENV = "NETAPP_TOKEN"
CA_ENV = "NETAPP_CA"  # a CA bundle to verify a TLS server with
CLIENT_CONFIG_ENV = "NETAPP_CLIENT_CONFIG"
DEFAULT_URL = "http://127.0.0.1:8080"


class ClientConfig(BaseModel):
    """What the client file holds."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(pattern=r"^https?://[^\s/]+", description="the NetApp's API")
    token: Optional[str] = Field(None, min_length=1, repr=False)
    ca: Optional[str] = Field(None, min_length=1, description="a CA bundle to verify a TLS server with")
    written_by: Optional[str] = Field(None, description="who wrote the file, e.g. netapp demo")


def client_config_path() -> Path:
    """The client file this process reads: NETAPP_CLIENT_CONFIG, else the XDG configuration home's."""
    named = os.environ.get(CLIENT_CONFIG_ENV)
    if named:
        return Path(named)
    home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(home) / "dpp-netapp" / "client.yaml"


def read_client_config(path: Path) -> Optional[ClientConfig]:
    """The file's configuration; None when there is no file. A file that cannot be read or is not a
    client file ends the command with one line naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        fail(f"{path}: cannot read the client file ({exc.strerror}); fix it, or set {CLIENT_CONFIG_ENV}",
             EXIT_BAD_INPUT)
    try:
        config = ClientConfig.model_validate(yaml.safe_load(text))
    except yaml.YAMLError as exc:
        fail(f"{path}: not YAML ({exc.__class__.__name__}); the client file holds url and token", EXIT_BAD_INPUT)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the file"
        fail(f"{path}: {where}: {error['msg']} (a client file holds url, token, ca and written_by)",
             EXIT_BAD_INPUT)
    if config.token is not None and stat.S_IMODE(path.stat().st_mode) & 0o077:
        warn(f"{path} holds a token and others may read it: chmod 600 {shlex.quote(str(path))}")
    return config


def write_client_config(path: Path, config: ClientConfig) -> None:
    """Write the file atomically, readable by its owner only (its directory too, if created)."""
    text = yaml.safe_dump(config.model_dump(exclude_none=True), sort_keys=False)
    write_private(path, text, dir_mode=0o700)


def remove_client_config(path: Path, token: str) -> bool:
    """Remove the file if it still holds `token` (nobody replaced it since); whether it did."""
    try:
        current = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    if not isinstance(current, dict) or current.get("token") != token:
        return False
    path.unlink(missing_ok=True)
    return True


# --- where a command sends its requests -----------------------------------------------------------


@dataclass(frozen=True)
class Address:
    """The URL, token and TLS verification a command uses; what came from the client file is
    named in error lines."""

    url: str
    token: Optional[str] = field(repr=False)
    verify: Any  # True, or a CA bundle's path
    file: Optional[Path] = None  # the client file, when the URL or the token came from it
    written_by: Optional[str] = None  # who wrote that file
    url_from_file: bool = False
    token_from_file: bool = False

    def unreachable_hint(self) -> str:
        """What to check when nothing answers at the URL."""
        if self.url_from_file:
            writer = f", written by {self.written_by}" if self.written_by else ""
            return (f"the URL is from {self.file}{writer}: is that NetApp still running? "
                    f"(remove the file, or set --url or {URL_ENV})")
        return f"is `netapp serve` running? (set --url or {URL_ENV})"


def resolve_address(url: Optional[str], token: Optional[str]) -> Address:
    """Option, then environment, then the client file, read only when an option or the environment
    leaves the URL or the token unset; the default URL last. The file's token and CA bundle go only
    to the file's URL."""
    url = url or os.environ.get(URL_ENV)
    token = token or os.environ.get(TOKEN_ENV)
    ca = os.environ.get(CA_ENV)
    config, path = None, None
    if not (url and token):
        path = client_config_path()
        config = read_client_config(path)
    if config is None:
        return Address(url=(url or DEFAULT_URL).rstrip("/"), token=token, verify=ca or True)
    url_from_file = not url
    url = url or config.url
    own = url.rstrip("/") == config.url.rstrip("/")
    token_from_file = own and not token and config.token is not None
    return Address(
        url=url.rstrip("/"),
        token=config.token if token_from_file else token,
        verify=ca or (config.ca if own else None) or True,
        file=path,
        written_by=config.written_by,
        url_from_file=url_from_file,
        token_from_file=token_from_file,
    )


# --- a session's client file (netapp demo) --------------------------------------------------------


@dataclass
class PublishedClient:
    """The way to a running NetApp that a session (the demo) offers other terminals: the client
    file it wrote (None if it wrote none, `why_not` says why) and an export line."""

    url: str
    token: str = field(repr=False)
    path: Optional[Path]
    why_not: str = ""

    def instructions(self) -> str:
        """What to tell the user: the file, and the export line (the one place the token is shown)."""
        exports = f"export {URL_ENV}={shlex.quote(self.url)} {TOKEN_ENV}={shlex.quote(self.token)}"
        if self.path is not None:
            return (f"netapp commands in another terminal (as this user) reach it through {self.path}, "
                    f"removed when the demo ends; or, in any shell:\n  {exports}")
        return f"{self.why_not}; for netapp commands in another terminal, first:\n  {exports}"

    def withdraw(self) -> None:
        """Remove the file if it is still the one written (another session may have replaced it)."""
        if self.path is not None:
            remove_client_config(self.path, self.token)
            self.path = None


def publish_client(url: str, token: str, written_by: str) -> PublishedClient:
    """Write the client file for `url` and `token` and say how to use it. A file someone else
    wrote (no `written_by` of this kind) is left as it is; one an earlier session left is replaced."""
    path = client_config_path()
    existing = _peek(path)
    if existing is not None and existing.get("written_by") != written_by:
        return PublishedClient(url, token, None, f"{path} is not {written_by}'s and stays as it is")
    try:
        write_client_config(path, ClientConfig(url=url, token=token, written_by=written_by))
    except OSError as exc:
        return PublishedClient(url, token, None, f"cannot write {path} ({exc.strerror})")
    return PublishedClient(url, token, path)


def _peek(path: Path) -> Optional[dict]:
    """The file's content, {} when it is unreadable or not a mapping; None when there is no file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}
