"""A connection to an OpenStack cloud through openstacksdk, imported only here and only when used.

Credentials come from clouds.yaml (a cloud name from --cloud or OS_CLOUD; the file from
--clouds-file, OS_CLIENT_CONFIG_FILE or openstacksdk's usual places) or from OS_* variables.
Every failure is an `OpenStackError` whose message is one actionable line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

INSTALL_HINT = "pip install 'dpp-netapp[openstack]'"


class OpenStackError(Exception):
    """Something about the cloud, said in one line: bad credentials, an unknown server, a refusal."""


def sdk() -> Any:
    """The openstack package, or an OpenStackError saying how to install it."""
    try:
        import openstack
    except ImportError:
        raise OpenStackError(f"openstacksdk is not installed ({INSTALL_HINT})") from None
    return openstack


def connect(cloud: Optional[str] = None, clouds_file: Optional[Path] = None) -> Any:
    """An authenticated openstack.connection.Connection; authenticates at once so that bad
    credentials are said here, not at the first look-up."""
    openstack = sdk()
    from openstack import exceptions
    from openstack.config import loader

    if clouds_file is not None and not clouds_file.is_file():
        raise OpenStackError(f"--clouds-file {clouds_file}: no such file")
    try:
        config = loader.OpenStackConfig(config_files=[str(clouds_file)] if clouds_file else None)
        region = config.get_one(cloud=cloud)
    except exceptions.ConfigException as exc:
        raise OpenStackError(f"cloud {cloud or '(none named)'}: {_first_line(exc)}") from None
    except errors() as exc:  # keystoneauth's: the auth options are incomplete
        hint = "" if cloud else ": name a cloud of clouds.yaml (--cloud, OS_CLOUD) or source an openrc (OS_AUTH_URL, ...)"
        raise OpenStackError(f"cloud {cloud or '(none named)'}: {_first_line(exc)}{hint}") from None
    connection = openstack.connection.Connection(config=region)
    auth_url = region.config.get("auth", {}).get("auth_url") or "(no auth_url)"
    try:
        connection.authorize()
    except errors() as exc:
        raise OpenStackError(f"cannot authenticate at {auth_url}: {_first_line(exc)}") from None
    return connection


def errors() -> tuple[type[BaseException], ...]:
    """What openstacksdk and keystoneauth raise for a cloud's refusal or absence."""
    from keystoneauth1 import exceptions as auth_exceptions
    from openstack import exceptions

    return exceptions.SDKException, auth_exceptions.ClientException


def describe(exc: BaseException) -> str:
    """An openstacksdk or keystoneauth error as one line."""
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
