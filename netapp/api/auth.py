"""Bearer tokens: who a token belongs to (tenant) and what it may do (scopes).

The tokens file (YAML) holds only SHA-256 hashes of the tokens:

    tokens:
      - name: slicing-manager
        sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
        tenant: operator-a
        scopes: [read, intents:write, slices:write]

It is read again when it changes (mtime, size or inode), so tokens can be added or revoked without
a restart. No FastAPI here: the CLI (`netapp tokens add`) shares the file format.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from netapp.core.config import Settings
from netapp.core.files import write_private
from netapp.intents.errors import IntentError
from netapp.service.contract import Principal, Scope

log = logging.getLogger(__name__)

TOKEN_PREFIX = "dpp_"  # makes a leaked token recognisable to secret scanners
TOKEN_BYTES = 32

# Who the API sees when authentication is disabled (Settings allows that on loopback only).
ANONYMOUS_ADMIN = Principal(tenant="admin", scopes=frozenset({Scope.ADMIN}), name="auth-disabled")


class TokensFileError(Exception):
    """The tokens file is missing, unreadable or invalid; the message names the file and field."""


class TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the token")
    tenant: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    scopes: list[Scope] = Field(min_length=1)

    def principal(self) -> Principal:
        return Principal(tenant=self.tenant, scopes=frozenset(self.scopes), name=self.name)


class TokensFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> "TokensFile":
        seen: set[str] = set()
        for entry in self.tokens:
            if entry.name in seen:
                raise ValueError(f"token name {entry.name!r} is used twice")
            seen.add(entry.name)
        return self


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def read_tokens_file(path: Path) -> TokensFile:
    """The file's tokens; a missing file is an error (the CLI treats it as empty itself)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokensFileError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise TokensFileError(f"{path}: not valid YAML: {exc}") from None
    try:
        return TokensFile.model_validate({} if data is None else data)
    except ValidationError as exc:
        raise TokensFileError(f"{path}: {IntentError.from_validation(exc).line()}") from None


def write_tokens_file(path: Path, tokens: TokensFile) -> None:
    """Replace the file atomically (the server may read it at any moment), readable by owner only."""
    write_private(path, yaml.safe_dump(tokens.model_dump(mode="json"), sort_keys=False))


class TokenStore:
    """The tokens file's hashes, reloaded when the file changes. Thread-safe: routes run in a pool."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._signature: Optional[tuple[int, int, int]] = None
        self._entries: list[TokenEntry] = []
        self._load(self._stat())

    def principal_for(self, token: str) -> Optional[Principal]:
        """The principal a presented token stands for, or None."""
        entries = self._current()
        presented = token_hash(token).encode("ascii")
        found: Optional[TokenEntry] = None
        # Compare against every entry, without stopping early, so the time taken does not tell
        # which entry (or how much of a hash) matched.
        for entry in entries:
            if hmac.compare_digest(presented, entry.sha256.encode("ascii")):
                found = entry
        return None if found is None else found.principal()

    def _current(self) -> list[TokenEntry]:
        with self._lock:
            signature = self._stat_or_none()
            if signature is None:
                self._forget_all()
            elif signature != self._signature:
                self._reload(signature)
            return self._entries

    def _forget_all(self) -> None:
        # A removed file revokes every token; an invalid one (below) is taken for a mistake.
        if self._entries:
            log.warning("tokens file %s is gone: every token is revoked", self.path)
        self._entries, self._signature = [], None

    def _reload(self, signature: tuple[int, int, int]) -> None:
        try:
            self._load(signature)
        except TokensFileError as exc:
            # Keep serving with the last good tokens: an editor may save in several steps. The
            # signature is remembered so the error is logged once per change, not per request.
            self._signature = signature
            log.error("tokens file not reloaded, keeping the previous tokens: %s", exc)

    def _load(self, signature: tuple[int, int, int]) -> None:
        # `signature` was taken before reading: a change in between makes the next request read
        # the file again, rather than go unnoticed.
        entries = read_tokens_file(self.path).tokens
        self._entries, self._signature = entries, signature
        log.info("tokens file %s: %d tokens", self.path, len(entries))

    def _stat(self) -> tuple[int, int, int]:
        try:
            return _signature_of(self.path.stat())
        except OSError as exc:
            raise TokensFileError(
                f"{self.path}: cannot read: {exc.strerror} (create it with `netapp tokens add`)"
            ) from None

    def _stat_or_none(self) -> Optional[tuple[int, int, int]]:
        try:
            return _signature_of(self.path.stat())
        except OSError:
            return None


def _signature_of(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


class Authenticator:
    """Turns a presented bearer token into a principal (or None), per the settings."""

    def __init__(self, store: Optional[TokenStore]):
        self._store = store

    @classmethod
    def from_settings(cls, settings: Settings) -> "Authenticator":
        if settings.auth_disabled:
            return cls(None)
        return cls(TokenStore(Path(settings.tokens_file)))

    def authenticate(self, token: Optional[str]) -> Optional[Principal]:
        if self._store is None:
            return ANONYMOUS_ADMIN
        if not token:
            return None
        return self._store.principal_for(token)
