"""`runguard.proxy.core.schema`: the instance a synthetic stop carries is valid for the schema the request demands.

`instance_for` must return JSON valid for the schema (checked here with an
independent validator, formats included) or None, never an invalid instance:
an agent with an output type fails on text that does not parse.
"""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from runguard.proxy.core import schema
from runguard.proxy.core.events import OutputSchema

MESSAGE = "RunGuard stopped run r-1: non_progress: tool 'search' returned the same result 3 times."


def instance(raw: dict[str, Any], dialect: str = "json_schema") -> Any:
    text = schema.instance_for(OutputSchema(raw, "out", dialect), MESSAGE)
    assert text is not None, f"no instance for {raw}"
    value = json.loads(text)
    checked = schema.to_json_schema(OutputSchema(raw, "out", dialect))
    cls = jsonschema.validators.validator_for(checked)
    cls(checked, format_checker=cls.FORMAT_CHECKER).validate(value)
    return value


def test_message_goes_into_the_property_named_for_it() -> None:
    raw = {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "title": {"type": "string"}, "message": {"type": "string"}},
        "required": ["count", "title", "message"],
        "additionalProperties": False,
    }
    assert instance(raw) == {"count": 0, "title": "", "message": MESSAGE}


def test_nested_objects_arrays_with_min_items_and_enums() -> None:
    raw = {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["stopped", "ok"]},
            "steps": {
                "type": "array",
                "minItems": 2,
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "done": {"type": "boolean"}},
                    "required": ["name", "done"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["verdict", "steps"],
        "additionalProperties": False,
    }
    value = instance(raw)
    assert value["verdict"] == "stopped"
    assert len(value["steps"]) == 2
    assert value["steps"][0]["name"] == MESSAGE  # the first free string carries the message


def test_defs_and_refs_including_chains_and_escaped_pointers() -> None:
    raw = {
        "$defs": {
            "Item": {"$ref": "#/$defs/Real~1Item"},
            "Real/Item": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1}},
        "required": ["items"],
    }
    assert instance(raw) == {"items": [{"text": MESSAGE}]}


def test_any_of_picks_a_valid_option_and_one_of_an_exclusive_one() -> None:
    assert instance({"anyOf": [{"type": "integer", "minimum": 3}, {"type": "null"}]}) == 3
    # oneOf: the first option's instance ("" for a string) also matches the second; pick one valid for one only.
    raw = {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 0}, {"type": "integer"}]}
    assert instance(raw) == MESSAGE


def test_all_of_is_merged() -> None:
    raw = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer", "minimum": 2}}, "required": ["a"]},
            {"properties": {"reason": {"type": "string"}}, "required": ["reason"]},
        ]
    }
    assert instance(raw) == {"a": 2, "reason": MESSAGE}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"type": "integer", "minimum": 5}, 5),
        ({"type": "integer", "minimum": 2.5}, 3),
        ({"type": "integer", "exclusiveMinimum": 4}, 5),
        ({"type": "integer", "minimum": 7, "multipleOf": 5}, 10),
        ({"type": "integer", "maximum": -3}, -3),
        ({"type": "integer", "exclusiveMaximum": 0}, -1),
        ({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, 0.5),
        ({"type": "number", "minimum": 1.5}, 1.5),
        ({"type": "integer", "minimum": 1, "exclusiveMinimum": True}, 2),  # draft 4 flag
    ],
)
def test_numbers_respect_their_bounds(raw: dict[str, Any], expected: float) -> None:
    assert instance(raw) == expected


def test_strings_respect_length_and_known_formats() -> None:
    assert instance({"type": "string", "maxLength": 12}) == MESSAGE[:12]
    assert instance({"type": "string", "minLength": 3, "maxLength": 0 + 3}) == MESSAGE[:3]
    raw = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid"},
            "mail": {"type": "string", "format": "email"},
            "summary": {"type": "string"},
        },
        "required": ["when", "day", "id", "mail", "summary"],
    }
    value = instance(raw)
    assert value["summary"] == MESSAGE
    datetime.datetime.fromisoformat(value["when"])
    uuid.UUID(value["id"])


def test_gemini_openapi_dialect_with_snake_case_keys_google_genai_sends() -> None:
    # What google-genai 2.34 sends for a pydantic model as `responseSchema` (observed on the wire).
    raw = {
        "type": "OBJECT",
        "properties": {
            "message": {"type": "STRING", "max_length": 400},
            "findings": {
                "type": "ARRAY",
                "min_items": 1,
                "items": {
                    "type": "OBJECT",
                    "properties": {
                        "label": {"type": "STRING", "enum": ["ok", "stopped"]},
                        "score": {"type": "INTEGER", "minimum": 1.0, "maximum": 5.0},
                    },
                    "property_ordering": ["label", "score"],
                    "required": ["label", "score"],
                },
            },
            "note": {"type": "STRING", "nullable": True},
            "pages": {"type": "ARRAY", "minItems": "2", "items": {"type": "INTEGER"}},  # proto-JSON int64 string
        },
        "property_ordering": ["message", "findings", "note"],
        "required": ["message", "findings", "note", "pages"],
    }
    value = instance(raw, "openapi")
    assert value == {"message": MESSAGE, "findings": [{"label": "ok", "score": 1}], "note": "", "pages": [0, 0]}


def test_json_object_and_empty_schemas_get_a_message_object() -> None:
    assert instance({}, "json_object") == {"message": MESSAGE}
    assert instance({}) == {"message": MESSAGE}


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "string", "pattern": "^[a-z]{3}$"},  # patterns are not generated
        {"type": "integer", "minimum": 5, "maximum": 3},  # unsatisfiable
        {"type": "array", "minItems": 2, "uniqueItems": True, "items": {"type": "boolean", "const": True}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "required": ["a"]},
        {"type": "object", "properties": {"self": {"$ref": "#"}}, "required": ["self"]},  # infinite
        {"type": "string", "format": "date-time", "maxLength": 4},
        {"not": {}},
        {"type": "nonsense"},
    ],
)
def test_unsatisfiable_or_unbuildable_schemas_give_none(raw: dict[str, Any]) -> None:
    assert schema.instance_for(OutputSchema(raw, "out"), MESSAGE) is None


class Finding(BaseModel):
    label: Literal["ok", "stopped"]
    score: int = Field(ge=1, le=5)
    seen_at: datetime.datetime


class Report(BaseModel):
    reason: str = Field(max_length=500)
    findings: list[Finding] = Field(min_length=1)
    note: str | None
    tags: list[str]


def test_pydantic_model_schemas_parse_back_into_the_model() -> None:
    raw = Report.model_json_schema()
    text = schema.instance_for(OutputSchema(raw, "Report"), MESSAGE)
    assert text is not None
    report = Report.model_validate_json(text)
    assert report.reason == MESSAGE and len(report.findings) == 1


# -- property: never an invalid instance ---------------------------------------------------------

_leaf = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "minLength": st.integers(0, 5),
            "maxLength": st.integers(0, 200),
            "format": st.sampled_from(["date", "date-time", "uuid", "email", "zzz-unknown"]),
            "pattern": st.just("^x+$"),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["integer", "number"])},
        optional={
            "minimum": st.integers(-20, 20) | st.floats(-20, 20, allow_nan=False),
            "maximum": st.integers(-20, 20),
            "exclusiveMinimum": st.integers(-20, 20),
            "exclusiveMaximum": st.integers(-20, 20),
            "multipleOf": st.integers(1, 7),
        },
    ),
    st.fixed_dictionaries({"type": st.just("boolean")}),
    st.fixed_dictionaries({"enum": st.lists(st.integers() | st.text(max_size=5), min_size=1, max_size=3)}),
    st.fixed_dictionaries({"const": st.integers() | st.none()}),
    st.just({"type": "null"}),
    st.just({"$ref": "#/$defs/Leaf"}),
)


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from(["message", "a", "b", "reason", "items"])
    objects = st.builds(
        lambda props, extra, closed: {
            "type": "object",
            "properties": props,
            "required": [k for k in props if k not in extra],
            **({"additionalProperties": False} if closed else {}),
        },
        st.dictionaries(names, children, max_size=4),
        st.sets(names),
        st.booleans(),
    )
    arrays = st.builds(
        lambda items, low, unique: {
            "type": "array",
            "items": items,
            "minItems": low,
            **({"uniqueItems": True} if unique else {}),
        },
        children,
        st.integers(0, 3),
        st.booleans(),
    )
    unions = st.builds(
        lambda key, options: {key: options},
        st.sampled_from(["anyOf", "oneOf", "allOf"]),
        st.lists(children, min_size=1, max_size=3),
    )
    nullable = st.builds(lambda sub: {**sub, "type": [sub["type"], "null"]} if "type" in sub else sub, children)
    return objects | arrays | unions | nullable


_schemas = st.recursive(_leaf, _extend, max_leaves=12).map(
    lambda root: {**root, "$defs": {"Leaf": {"type": "string", "maxLength": 30}}}
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas)
def test_instance_for_returns_a_valid_instance_or_none(raw: dict[str, Any]) -> None:
    text = schema.instance_for(OutputSchema(raw, "out"), MESSAGE)
    if text is None:
        return
    cls = jsonschema.validators.validator_for(raw)
    assert cls(raw, format_checker=cls.FORMAT_CHECKER).is_valid(json.loads(text)), text


_satisfiable_leaf = st.one_of(
    st.builds(
        lambda low, extra: {"type": "string", "minLength": low, "maxLength": low + extra},
        st.integers(0, 5),
        st.integers(0, 300),
    ),
    st.builds(lambda low: {"type": "integer", "minimum": low}, st.integers(-50, 50)),
    st.builds(lambda high: {"type": "number", "exclusiveMaximum": high}, st.integers(-50, 50)),
    st.just({"type": "boolean"}),
    st.builds(lambda values: {"enum": values}, st.lists(st.text(max_size=4), min_size=1, max_size=3)),
    st.sampled_from([{"type": "string", "format": f} for f in ("date", "date-time", "uuid", "email", "uri")]),
)


def _satisfiable(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    objects = st.builds(
        lambda props: {"type": "object", "properties": props, "required": list(props), "additionalProperties": False},
        st.dictionaries(st.sampled_from(["message", "a", "b", "answer"]), children, max_size=4),
    )
    arrays = st.builds(
        lambda items, low: {"type": "array", "items": items, "minItems": low}, children, st.integers(0, 3)
    )
    optional = st.builds(lambda sub: {"anyOf": [sub, {"type": "null"}]}, children)
    return objects | arrays | optional


@settings(max_examples=200, deadline=None)
@given(st.recursive(_satisfiable_leaf, _satisfiable, max_leaves=10))
def test_satisfiable_schemas_always_get_a_valid_instance(raw: dict[str, Any]) -> None:
    instance(raw)
