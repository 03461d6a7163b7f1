"""JSON schemas a request demands for its output: normalise, validate, and fill.

Three dialects reach the proxy: plain JSON Schema (OpenAI `json_schema`,
Gemini `responseJsonSchema`), Gemini's OpenAPI subset (`responseSchema`,
UPPERCASE types, `nullable`) and "any JSON object" (`json_object`). The
proxy needs two things from them: whether a model's answer validates (the
`structured_output` detector) and a small valid instance carrying a message
(a synthetic "stop" completion an agent with an output type can parse).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import unquote

import orjson
from jsonschema import validators
from jsonschema.exceptions import SchemaError, UnknownType
from referencing.exceptions import Unresolvable

from runguard.proxy.core.events import OutputSchema

MAX_DEPTH = 32
_MESSAGE_KEYS = ("message", "reason", "answer", "response", "result", "text", "summary", "content", "output")
# google-genai sends a pydantic model's `responseSchema` with these keys in snake_case (observed:
# `min_items`, `max_length`, `property_ordering`); Google's proto-JSON parser accepts both spellings.
_OPENAPI_KEYS = {
    "any_of": "anyOf",
    "min_items": "minItems",
    "max_items": "maxItems",
    "min_length": "minLength",
    "max_length": "maxLength",
    "min_properties": "minProperties",
    "max_properties": "maxProperties",
    "property_ordering": "propertyOrdering",
}
# Proto-JSON writes int64 fields as strings ("minItems": "1").
_INT64_KEYS = frozenset(("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"))
# Values for the string formats a model's output type commonly declares (pydantic: datetime, date, UUID...).
_FORMATS = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00Z",
    "duration": "P0D",
    "email": "runguard@example.com",
    "idn-email": "runguard@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "iri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri-reference": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "regex": ".*",
    "json-pointer": "",
}


def _lower_types(node: Any, depth: int = 0) -> Any:
    """Gemini's OpenAPI subset -> JSON Schema: lowercase types, `nullable` -> a null type, camelCase keys."""
    if depth > MAX_DEPTH:
        return node
    if isinstance(node, list):
        return [_lower_types(item, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for raw_key, value in node.items():
        key = _OPENAPI_KEYS.get(str(raw_key), str(raw_key))
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _lower_types(sub, depth + 1) for name, sub in value.items()}
        elif key in ("propertyOrdering", "nullable"):
            continue
        elif key in _INT64_KEYS and isinstance(value, str) and value.isdigit():
            out[key] = int(value)
        else:
            out[key] = _lower_types(value, depth + 1)
    if node.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def to_json_schema(output: OutputSchema) -> dict[str, Any]:
    if output.dialect == "json_object":
        return {"type": "object"}
    if output.dialect == "openapi":
        converted = _lower_types(output.schema)
        return converted if isinstance(converted, dict) else {}
    return output.schema


# A schema jsonschema cannot use (a bad keyword value, an unknown type, a $ref it cannot resolve):
# the request's problem, not the model's.
SCHEMA_PROBLEMS: tuple[type[Exception], ...] = (SchemaError, UnknownType, Unresolvable)


def validate(schema: dict[str, Any], text: str) -> bool | None:
    """Whether `text` is JSON valid for `schema`; None when the schema itself is unusable (`SCHEMA_PROBLEMS`):
    the answer is then not judged either way.

    Any other exception (a failure of the validator itself, e.g. recursion on a deep answer) is raised:
    the detector that asked fails for this response, which the engine logs and counts
    (`runguard_detector_faults_total`), instead of the answer passing as valid unseen.
    """
    try:
        instance = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    try:
        cls = validators.validator_for(schema)
        return bool(cls(schema).is_valid(instance))
    except SCHEMA_PROBLEMS:
        return None


class _Filler:
    """Builds a minimal instance of a schema, putting the message into the first fitting string."""

    def __init__(self, root: dict[str, Any], message: str) -> None:
        self._root = root
        self._message = message
        self._placed = False

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """Follow local `$ref`s (chains too); siblings of a `$ref` are kept (2020-12 applies both)."""
        for _ in range(MAX_DEPTH):
            ref = node.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#"):
                return node
            target: Any = self._root
            for part in (p for p in unquote(ref[1:]).split("/") if p):
                step = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, list) and step.isdigit() and int(step) < len(target):
                    target = target[int(step)]
                else:
                    target = target.get(step) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                return {}
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **siblings} if siblings else target
        return {}

    def _fits(self, node: dict[str, Any], value: Any) -> bool:
        """Whether `value` is valid for the subschema `node` (local refs resolved against the root)."""
        probe: dict[str, Any] = {k: self._root[k] for k in ("$defs", "definitions") if k in self._root}
        probe.update(node)
        return _valid(probe, value)

    def _alternative(self, options: list[Any], depth: int, exclusive: bool) -> Any:
        """The first option of an anyOf/oneOf whose instance is valid for it (for oneOf: for it alone)."""
        placed, first = self._placed, None
        for index, option in enumerate(options):
            self._placed = placed
            value = self.build(option, depth + 1)
            if index == 0:
                first = (value, self._placed)
            node = self._resolve(option) if isinstance(option, dict) else {}
            if not self._fits(node, value):
                continue
            others = options[:index] + options[index + 1 :]
            if exclusive and any(isinstance(o, dict) and self._fits(self._resolve(o), value) for o in others):
                continue
            return value
        assert first is not None
        value, self._placed = first
        return value

    def _string(self, node: dict[str, Any]) -> str:
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS:
            return _FORMATS[fmt]
        if self._placed or fmt or node.get("pattern"):
            text = ""
        else:
            text, self._placed = self._message, True
        low, high = node.get("minLength"), node.get("maxLength")
        if isinstance(high, int):
            text = text[: max(high, 0)]
        return text + "-" * max(0, (low if isinstance(low, int) else 0) - len(text))

    def _object(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        found = node.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        raw_required = node.get("required")
        required = list(
            dict.fromkeys(k for k in (raw_required if isinstance(raw_required, list) else []) if isinstance(k, str))
        )
        # The message goes into the property whose name says it is one, when there is such a property.
        ordered = sorted(required, key=lambda k: (k.lower() not in _MESSAGE_KEYS, required.index(k)))
        built = {key: self.build(props.get(key, {}), depth + 1) for key in ordered}
        if not self._placed:
            spare = next((k for k in props if k.lower() in _MESSAGE_KEYS and k not in built), None)
            if (
                spare is not None
                and isinstance(props[spare], dict)
                and _type_of(self._resolve(props[spare])) == "string"
            ):
                built[spare] = self.build(props[spare], depth + 1)
        return {key: built[key] for key in [*required, *(k for k in built if k not in required)]}

    def _array(self, node: dict[str, Any], depth: int) -> list[Any]:
        low = node.get("minItems")
        count = low if isinstance(low, int) and low > 0 else 0
        prefix = node.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = node.get("items", {})
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, node.get("additionalItems", {})
        out = [self.build(sub, depth + 1) for sub in prefix[:count]]
        out += [self.build(items, depth + 1) for _ in range(count - len(out))]
        return out

    def build(self, node: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH or not isinstance(node, dict):
            return None
        node = self._resolve(node)
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            return node["enum"][0]
        all_of = node.get("allOf")
        if isinstance(all_of, list) and all_of:
            return self.build(_merge(node, [self._resolve(o) for o in all_of if isinstance(o, dict)]), depth + 1)
        for key in ("anyOf", "oneOf"):
            options = node.get(key)
            if isinstance(options, list) and options:
                return self._alternative(options, depth, exclusive=key == "oneOf")
        kind = _type_of(node)
        if kind == "object":
            return self._object(node, depth)
        if kind == "array":
            return self._array(node, depth)
        if kind == "string":
            return self._string(node)
        if kind in ("integer", "number"):
            return _number(node, integer=kind == "integer")
        if kind == "boolean":
            return False
        return None


def _merge(node: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """An allOf folded into one schema: properties and required lists united, other keys from the first."""
    merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
    for part in parts:
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = [*merged.get("required", []), *value]
            else:
                merged.setdefault(key, value)
    return merged


def _bound(node: dict[str, Any], key: str, exclusive_key: str) -> tuple[float | None, bool]:
    """A lower or upper bound and whether it is exclusive (draft 4 flag or 2020-12 number)."""
    value = node.get(key)
    value = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    exclusive = node.get(exclusive_key)
    if exclusive is True:  # draft 4: a flag on minimum/maximum
        return value, value is not None
    if isinstance(exclusive, int | float) and not isinstance(exclusive, bool) and (value is None or exclusive >= value):
        return exclusive, True
    return value, False


def _number(node: dict[str, Any], *, integer: bool) -> int | float:
    """0 when the bounds allow it, else the value nearest 0 they allow; a multiple of `multipleOf`."""
    low, low_strict = _bound(node, "minimum", "exclusiveMinimum")
    high, high_strict = _bound(node, "maximum", "exclusiveMaximum")
    step = node.get("multipleOf")
    step = step if isinstance(step, int | float) and not isinstance(step, bool) and step > 0 else None
    value: float = 0
    up = True
    if low is not None and (low > 0 or (low == 0 and low_strict)):
        value = low
        if low_strict:
            value = math.floor(low) + 1 if integer else (low + high) / 2 if high is not None else low + 1
    elif high is not None and (high < 0 or (high == 0 and high_strict)):
        value, up = high, False
        if high_strict:
            value = math.ceil(high) - 1 if integer else (low + high) / 2 if low is not None else high - 1
    if step is not None:
        value = (math.ceil(value / step) if up else math.floor(value / step)) * step
    if integer:
        return math.ceil(value) if up else math.floor(value)
    return int(value) if float(value).is_integer() else value


def _type_of(node: dict[str, Any]) -> str | None:
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and isinstance(node.get("properties"), dict):
        return "object"
    if kind is None and ("items" in node or "prefixItems" in node):
        return "array"
    return kind if isinstance(kind, str) else None


def _valid(schema: dict[str, Any], instance: Any) -> bool:
    """Strict check of a built instance: formats are checked too (a pydantic parser checks them)."""
    try:
        cls = validators.validator_for(schema)
        return bool(cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(instance))
    except Exception:  # an invalid or unresolvable schema: no instance can be vouched for
        return False


def instance_for(output: OutputSchema, message: str) -> str | None:
    """JSON text valid for the demanded schema that carries `message` where it can; None if none is found."""
    schema = to_json_schema(output)
    if output.dialect == "json_object" or not schema:
        return orjson.dumps({"message": message}).decode()
    try:
        text = orjson.dumps(_Filler(schema, message).build(schema)).decode()
    except (TypeError, RecursionError):
        return None
    return text if _valid(schema, orjson.loads(text)) else None
