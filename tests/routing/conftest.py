"""The API's fixtures (a real server over a fake service, tokens of an admin and tenants), for the
routes' API tests here."""

from tests.api.conftest import admin, api_app, client_for, server, service, tenant_a, tokens_path  # noqa: F401
