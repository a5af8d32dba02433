"""`netapp tokens add`: a random token printed once, its hash appended to the tokens file."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from netapp.api.auth import TokenStore, read_tokens_file
from netapp.cli.main import app
from netapp.service.contract import Scope


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch):
    for name in ("NETAPP_CONFIG", "NETAPP_TOKENS_FILE", "NETAPP_AUTH_DISABLED"):
        monkeypatch.delenv(name, raising=False)


def add(*args: str):
    return CliRunner().invoke(app, ["tokens", "add", *args])


def test_given_a_new_name_then_the_token_is_printed_once_and_only_its_hash_is_stored(tmp_path):
    path = tmp_path / "tokens.yaml"

    result = add(
        "--name",
        "slicer",
        "--tenant",
        "op-a",
        "--scope",
        "read",
        "--scope",
        "slices:write",
        "--file",
        str(path),
    )

    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert token.startswith("dpp_") and len(token) > 40 and "\n" not in token
    assert token not in path.read_text()
    assert path.stat().st_mode & 0o077 == 0
    principal = TokenStore(path).principal_for(token)
    assert principal is not None and principal.tenant == "op-a"
    assert principal.scopes == frozenset({Scope.READ, Scope.SLICES_WRITE})


def test_given_an_existing_file_then_the_token_is_added_and_the_others_stay(tmp_path):
    path = tmp_path / "tokens.yaml"
    first = add("--name", "one", "--tenant", "t", "--scope", "read", "--file", str(path)).stdout.strip()

    second = add("--name", "two", "--tenant", "t", "--scope", "admin", "--file", str(path)).stdout.strip()

    assert [entry.name for entry in read_tokens_file(path).tokens] == ["one", "two"]
    assert TokenStore(path).principal_for(first).name == "one"
    assert TokenStore(path).principal_for(second).is_admin


def test_given_a_name_in_use_then_exit_2_and_the_file_is_unchanged(tmp_path):
    path = tmp_path / "tokens.yaml"
    add("--name", "one", "--tenant", "t", "--scope", "read", "--file", str(path))
    before = path.read_text()

    result = add("--name", "one", "--tenant", "t", "--scope", "read", "--file", str(path))

    assert result.exit_code == 2 and "a token named 'one' exists already" in result.stderr
    assert path.read_text() == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--name", "has space", "--tenant", "t", "--scope", "read"], "name: String should match pattern"),
        (["--name", "n", "--tenant", "t", "--scope", "root"], "'root' is not one of"),
        (["--name", "n", "--tenant", "t"], "Missing option '--scope'"),
    ],
)
def test_given_bad_options_then_exit_2_with_one_line(tmp_path, args, message):
    result = add(*args, "--file", str(tmp_path / "tokens.yaml"))

    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "tokens.yaml").exists()


def test_given_an_invalid_tokens_file_then_exit_2_naming_the_field(tmp_path):
    path = tmp_path / "tokens.yaml"
    path.write_text("tokens: [{name: a}]\n")

    result = add("--name", "n", "--tenant", "t", "--scope", "read", "--file", str(path))

    assert result.exit_code == 2 and "tokens[0].sha256: required field is missing" in result.stderr


def test_given_the_environment_names_the_file_then_no_option_is_needed(tmp_path, monkeypatch):
    path = tmp_path / "tokens.yaml"
    monkeypatch.setenv("NETAPP_TOKENS_FILE", str(path))

    result = add("--name", "n", "--tenant", "t", "--scope", "read")

    assert result.exit_code == 0 and [e.name for e in read_tokens_file(path).tokens] == ["n"]


def test_given_no_file_anywhere_then_exit_2_says_where_to_give_it():
    result = add("--name", "n", "--tenant", "t", "--scope", "read")

    assert result.exit_code == 2
    assert "no --file given" in result.stderr and len(result.stderr.strip().splitlines()) == 1
