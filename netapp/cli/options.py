"""Options every command that talks to the REST API takes; what they leave unset comes from the
environment, then the client file (netapp.cli.client_config)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from netapp.cli.client_config import TOKEN_ENV, URL_ENV

UrlOption = Annotated[
    Optional[str], typer.Option("--url", help=f"The NetApp's API, e.g. http://127.0.0.1:8080 (or ${URL_ENV}, or the client file's).")
]
TokenOption = Annotated[
    Optional[str], typer.Option("--token", help=f"Bearer token (or ${TOKEN_ENV}, or the client file's).", show_default=False)
]
