"""Options every command that talks to the REST API takes."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from netapp.cli.client import TOKEN_ENV, URL_ENV

UrlOption = Annotated[
    Optional[str], typer.Option("--url", help=f"The NetApp's API, e.g. http://127.0.0.1:8080 (or ${URL_ENV}).")
]
TokenOption = Annotated[
    Optional[str], typer.Option("--token", help=f"Bearer token (or ${TOKEN_ENV}).", show_default=False)
]
