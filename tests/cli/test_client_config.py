"""The client file (netapp.cli.client_config): where commands find the URL and token that neither
an option nor the environment gives, and the file `netapp demo` writes and removes."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import typer
import yaml

from netapp.cli.client_config import (
    CA_ENV,
    CLIENT_CONFIG_ENV,
    DEFAULT_URL,
    TOKEN_ENV,
    URL_ENV,
    ClientConfig,
    client_config_path,
    publish_client,
    resolve_address,
    write_client_config,
)

FILE_URL, FILE_TOKEN = "http://127.0.0.1:41000", "dpp_from-the-file"


@pytest.fixture(autouse=True)
def config_home(tmp_path, monkeypatch) -> Path:
    """A configuration home of the test's own, and none of the variables set."""
    for name in (URL_ENV, TOKEN_ENV, CA_ENV, CLIENT_CONFIG_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config"


def write_file(**fields) -> Path:
    path = client_config_path()
    write_client_config(path, ClientConfig(**{"url": FILE_URL, "token": FILE_TOKEN, **fields}))
    return path


def test_the_file_lives_in_the_xdg_configuration_home_unless_a_variable_names_another(config_home, tmp_path,
                                                                                      monkeypatch):
    assert client_config_path() == config_home / "dpp-netapp" / "client.yaml"
    monkeypatch.setenv(CLIENT_CONFIG_ENV, str(tmp_path / "mine.yaml"))
    assert client_config_path() == tmp_path / "mine.yaml"


def test_given_neither_option_nor_variable_then_the_files_url_and_token_are_used():
    path = write_file(written_by="netapp demo")

    address = resolve_address(None, None)

    assert (address.url, address.token, address.verify) == (FILE_URL, FILE_TOKEN, True)
    assert address.url_from_file and address.token_from_file and address.file == path
    assert "written by netapp demo" in address.unreachable_hint() and str(path) in address.unreachable_hint()


def test_given_no_file_then_the_default_url_and_no_token():
    address = resolve_address(None, None)
    assert (address.url, address.token, address.file) == (DEFAULT_URL, None, None)
    assert "netapp serve" in address.unreachable_hint()


@pytest.mark.parametrize(
    ("option", "variable", "expected"),
    [
        ("opt", "env", "opt"),
        (None, "env", "env"),
        (None, None, "file"),
    ],
)
def test_an_option_wins_over_a_variable_which_wins_over_the_file(monkeypatch, option, variable, expected):
    write_file(url="http://file:1", token="file")
    urls = {"opt": "http://opt:1", "env": "http://env:1", "file": "http://file:1"}
    if variable:
        monkeypatch.setenv(URL_ENV, urls[variable])
        monkeypatch.setenv(TOKEN_ENV, variable)

    address = resolve_address(urls.get(option), option)

    assert (address.url, address.token) == (urls[expected], expected)


def test_given_another_url_then_the_files_token_and_ca_bundle_are_not_sent_there(monkeypatch):
    write_file(ca="/etc/dpp-netapp/ca.pem")

    elsewhere = resolve_address("https://netapp.example:8443", None)
    home = resolve_address(FILE_URL + "/", None)  # the same URL, spelt with a slash

    assert (elsewhere.token, elsewhere.verify, elsewhere.url_from_file) == (None, True, False)
    assert (home.token, home.verify) == (FILE_TOKEN, "/etc/dpp-netapp/ca.pem")


def test_given_url_and_token_then_the_file_is_not_read(capsys):
    client_config_path().parent.mkdir(parents=True)
    client_config_path().write_text("url: [not, a, url]\n")

    address = resolve_address("http://opt:1", "opt")

    assert (address.url, address.token, address.file) == ("http://opt:1", "opt", None)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("url: ftp://x\n", "url:"),
        ("url: http://x:1\ntokne: abc\n", "tokne:"),
        ("url: [\n", "not YAML"),
        ("- a list\n", "the file"),
    ],
)
def test_given_a_file_that_is_not_a_client_file_then_one_line_names_it_and_what_is_wrong(capsys, text, named):
    path = client_config_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)

    with pytest.raises(typer.Exit) as exited:
        resolve_address(None, None)

    line = capsys.readouterr().err
    assert exited.value.exit_code == 2 and line.count("\n") == 1
    assert line.startswith(f"netapp: {path}: ") and named in line, line


def test_the_file_is_written_for_its_owner_only_and_one_others_may_read_is_warned_of(capsys):
    path = write_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "warning" not in capsys.readouterr().err

    path.chmod(0o644)
    resolve_address(None, None)

    assert f"{path} holds a token and others may read it: chmod 600" in capsys.readouterr().err


# --- what the demo writes --------------------------------------------------------------------------


def test_given_no_file_then_the_demo_writes_one_and_removes_it_when_it_ends():
    published = publish_client(FILE_URL, FILE_TOKEN, written_by="netapp demo")

    assert published.path == client_config_path()
    assert yaml.safe_load(published.path.read_text()) == {
        "url": FILE_URL, "token": FILE_TOKEN, "written_by": "netapp demo"}
    assert str(published.path) in published.instructions()
    published.withdraw()
    assert not client_config_path().exists()


def test_the_export_line_sets_both_variables_in_a_shell():
    token = "dpp_it's-a-token"  # quoted as it must be, whatever the characters
    exports = publish_client(FILE_URL, token, written_by="netapp demo").instructions().splitlines()[-1]

    shell = subprocess.run(["sh", "-c", f'{exports}; printf "%s\\n%s" "${URL_ENV}" "${TOKEN_ENV}"'],
                           capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]})

    assert shell.stdout.splitlines() == [FILE_URL, token]


def test_given_someone_elses_file_then_the_demo_leaves_it_as_it_is():
    path = write_file(url="https://netapp.example:8443")
    before = path.read_text()

    published = publish_client(FILE_URL, "dpp_demo", written_by="netapp demo")
    published.withdraw()

    assert published.path is None and path.read_text() == before
    assert f"{path} is not netapp demo's" in published.instructions()
    assert f"export {URL_ENV}={FILE_URL} {TOKEN_ENV}=dpp_demo" in published.instructions()


def test_given_the_file_of_a_demo_that_did_not_end_cleanly_then_the_next_demo_replaces_it():
    write_file(written_by="netapp demo")
    published = publish_client("http://127.0.0.1:42000", "dpp_new", written_by="netapp demo")
    assert resolve_address(None, None).url == "http://127.0.0.1:42000"
    published.withdraw()
    assert not client_config_path().exists()


def test_given_another_demo_replaced_the_file_then_withdrawing_leaves_the_others():
    first = publish_client(FILE_URL, "dpp_first", written_by="netapp demo")
    publish_client("http://127.0.0.1:42000", "dpp_second", written_by="netapp demo")

    first.withdraw()

    assert resolve_address(None, None).token == "dpp_second"
