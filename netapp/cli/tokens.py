"""`netapp tokens ...`: bearer tokens of the REST API. The file keeps only their SHA-256 hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError

from netapp.api.auth import TokenEntry, TokensFile, TokensFileError, new_token, read_tokens_file, token_hash
from netapp.api.auth import write_tokens_file
from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.core.config import load_settings
from netapp.intents.errors import IntentError
from netapp.service.contract import Scope

app = typer.Typer(help="Bearer tokens of the REST API.", no_args_is_help=True)

TOKENS_FILE_ENV = "NETAPP_TOKENS_FILE"  # the same variable Settings.tokens_file reads


@app.command()
def add(
    name: Annotated[str, typer.Option("--name", help="A name for the token, shown in logs.")],
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant (slice owner) it acts for.")],
    scope: Annotated[
        list[Scope],
        typer.Option(
            "--scope",
            help="A scope it grants; repeat for several. read: every GET; intents:write: intents and "
            "telemetry subscriptions; slices:write: slices; admin: all, every tenant.",
        ),
    ],
    file: Annotated[
        Optional[Path],
        typer.Option(
            "--file",
            envvar=TOKENS_FILE_ENV,
            help="The tokens file; default: tokens_file of the service's settings.",
        ),
    ] = None,
) -> None:
    """Make a random token, print it once, and add its hash to the tokens file."""
    path = file or _settings_tokens_file()
    tokens = _existing_tokens(path)
    if any(existing.name == name for existing in tokens.tokens):
        fail(f"{path}: a token named {name!r} exists already; choose another --name", EXIT_BAD_INPUT)
    token = new_token()
    entry = _entry(name, tenant, scope, token)
    write_tokens_file(path, TokensFile(tokens=[*tokens.tokens, entry]))
    typer.echo(
        f"netapp: added token {name!r} for tenant {tenant!r} to {path}; it is shown only now:", err=True
    )
    typer.echo(token)


def _settings_tokens_file() -> Path:
    try:
        settings = load_settings()
    except ValueError as exc:  # pydantic's ValidationError is one
        fail(f"no --file given and the service settings do not load: {_one_line(exc)}", EXIT_BAD_INPUT)
    if settings.tokens_file is None:
        fail(f"no --file given and the settings name no tokens_file (set {TOKENS_FILE_ENV})", EXIT_BAD_INPUT)
    return Path(settings.tokens_file)


def _existing_tokens(path: Path) -> TokensFile:
    if not path.exists():
        return TokensFile()
    try:
        return read_tokens_file(path)
    except TokensFileError as exc:
        fail(str(exc), EXIT_BAD_INPUT)


def _entry(name: str, tenant: str, scopes: list[Scope], token: str) -> TokenEntry:
    try:
        unique_scopes = sorted(set(scopes), key=list(Scope).index)
        return TokenEntry(name=name, tenant=tenant, scopes=unique_scopes, sha256=token_hash(token))
    except ValidationError as exc:
        fail(IntentError.from_validation(exc).line(), EXIT_BAD_INPUT)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return IntentError.from_validation(exc).line()
    return str(exc).splitlines()[0]
