"""The published contract under api/: committed schemas equal the models', examples are valid.
(That every example works against the demo's site is tests/integration/test_examples.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netapp.intents.compiler import compile_document
from netapp.intents.loader import load_document
from netapp.intents.schema import render, schemas
from netapp.service.contract import SliceSpec
from netapp.service.slices import slice_intents
from tests.utils.intents import INTERFACES, paper_message

API = Path(__file__).resolve().parents[2] / "api"
SLICE_EXAMPLES = [API / "examples" / "slice.json"]
EXAMPLES = sorted(set((API / "examples").glob("*.json")) - set(SLICE_EXAMPLES))
# The examples are written for the demo's site (netapp.testbed.topology): its N3 interface is n3.
DEMO_INTERFACES = {**INTERFACES, "n3": 8}


@pytest.mark.parametrize("name", sorted(schemas()))
def test_committed_schema_matches_the_models(name):
    committed = API / "schemas" / name
    assert committed.exists(), f"{committed} is missing: run `python -m netapp.intents.schema api/schemas`"
    assert committed.read_text() == render(schemas()[name]), (
        f"{committed.name} drifted from the models: run `python -m netapp.intents.schema api/schemas`"
    )


def test_the_paper_example_is_the_message_verbatim_but_for_the_interface_it_names():
    message = paper_message()
    message["Params"][0]["paramValue"] = "n3"  # the paper's eth0: the demo's N3 interface instead
    assert json.loads((API / "examples" / "paper-legacy.json").read_text()) == message


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_every_example_parses_and_compiles(example):
    compiled = compile_document(load_document(example), DEMO_INTERFACES)
    assert compiled.ruleset.rules and compiled.ruleset.conflicts == ()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_every_example_is_valid_against_the_document_schema(example):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(example.read_text()), schemas()["intent-document.schema.json"])


def test_a_single_intent_example_is_valid_against_the_intent_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = schemas()["intent.schema.json"]
    for name in ("paper-legacy.json", "video-steer.json"):
        jsonschema.validate(json.loads((API / "examples" / name).read_text()), schema)


@pytest.mark.parametrize("example", SLICE_EXAMPLES, ids=lambda path: path.name)
def test_every_slice_example_is_a_slice_of_intents(example):
    assert slice_intents(SliceSpec.model_validate_json(example.read_text()))
