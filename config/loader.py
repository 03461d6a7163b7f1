"""Load settings from layers: CLI flags > env `RUNGUARD_*` > YAML file > built-in defaults.

Each layer is a nested dict; they are merged key by key and the result is
validated once. `LoadedSettings.sources` says where every value came from, for
`runguard-proxy config show`. An invalid value raises `ConfigError` naming the
dotted key, e.g. ``guard.detectors.spiral.threshold``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from runguard.config.placeholders import placeholder_secrets
from runguard.config.settings import Settings
from runguard.proxy.core.errors import ConfigError as ConfigError  # noqa: PLC0414 (re-exported: callers catch it from here)

ENV_PREFIX = "RUNGUARD_"


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 booleans: only true and false.

    PyYAML follows YAML 1.1, where on/off/yes/no are booleans too, so
    `action: off` would arrive as False and be refused as "not block, warn or
    off". Settings that are booleans still take yes/no/on/off: pydantic reads
    those strings as booleans. The resolver lists are copies: PyYAML's own
    `SafeLoader` is left as it is.
    """


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_yaml(text: str) -> Any:
    """A YAML document's value, with YAML 1.2 booleans (see `_Yaml12Loader`)."""
    return yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader: builds plain values only


# The contract names from DESIGN.md, mapped onto settings keys.
ENV_ALIASES: dict[str, str] = {
    "RUNGUARD_OPENAI_UPSTREAM": "upstreams.openai",
    "RUNGUARD_GEMINI_UPSTREAM": "upstreams.gemini",
    "RUNGUARD_ANTHROPIC_UPSTREAM": "upstreams.anthropic",
    "RUNGUARD_DATABASE_URL": "store.database_url",
    "RUNGUARD_STATE_URL": "state.url",
    "RUNGUARD_ADMIN_TOKEN": "server.admin_token",
    "RUNGUARD_HOST": "server.host",
    "RUNGUARD_PORT": "server.port",
    "RUNGUARD_SHADOW": "guard.shadow",
    "RUNGUARD_KEY_SALT": "runs.key_salt",
    "RUNGUARD_LOG_LEVEL": "log.level",
    "RUNGUARD_RECORD_BODIES": "store.record_bodies",
    # The settings outside any section, which RUNGUARD_SECTION__FIELD cannot spell.
    "RUNGUARD_PRICING_FILE": "pricing_file",
    "RUNGUARD_MODELS_FILE": "models_file",
}
# RUNGUARD_<NAME>_UPSTREAM for a provider added as a plug-in (its spec's `UpstreamSetting`), whose base URL
# setting is `upstreams.others.<name>`; the built-in providers' are aliases above.
_PLUGIN_UPSTREAM = re.compile(r"RUNGUARD_([A-Z][A-Z0-9]*)_UPSTREAM")
# Environment variables that are not settings (RUNGUARD_PROXY_URL: where the admin commands find the proxy).
ENV_IGNORED = {"RUNGUARD_CONFIG", "RUNGUARD_HOME", "RUNGUARD_REQUIRE_SERVICES", "RUNGUARD_PROXY_URL"}


DetectorValidator = Callable[[str, Mapping[str, Any]], None]


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    sources: dict[str, str] = field(default_factory=dict)


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: cannot set below a non-mapping value")
        node = child
    node[parts[-1]] = value


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _parse_env_value(raw: str) -> Any:
    """Env values are YAML scalars or flow collections: `true`, `8787`, `[a, b]`."""
    try:
        return load_yaml(raw) if raw.strip() else raw
    except yaml.YAMLError:
        return raw


_TEXT_TYPES = (str, SecretStr)


def _is_text(annotation: Any) -> bool:
    """A field type whose value is text as written: str, SecretStr, optionally None."""
    if annotation in _TEXT_TYPES:
        return True
    if get_origin(annotation) in (Union, UnionType):
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        return bool(kinds) and all(kind in _TEXT_TYPES for kind in kinds)
    return False


def is_text_setting(dotted: str) -> bool:
    """Whether the setting at `dotted` takes text, whatever the text looks like (`12345`, `true`, `null`).

    Found by walking the settings models' fields, so an environment value is typed by the field it sets,
    not by how its variable is spelt (alias or SECTION__FIELD).
    """
    model: Any = Settings
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return False
        if i == len(parts) - 1:
            return _is_text(field.annotation)
        model = field.annotation
    return False


def env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """`RUNGUARD_OPENAI_UPSTREAM` (aliases), `RUNGUARD_<NAME>_UPSTREAM` (a plug-in provider's upstream) and
    `RUNGUARD_SECTION__FIELD` (generic).

    A value for a text setting (a URL, a token, a salt) is taken as written; any other is read as a YAML
    scalar or flow collection (`true`, `8787`, `[a, b]`) and validated against its field.
    """
    layer: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_IGNORED:
            continue
        upstream = _PLUGIN_UPSTREAM.fullmatch(name)
        if name in ENV_ALIASES:
            dotted = ENV_ALIASES[name]
        elif upstream is not None:  # a plug-in provider's upstream (`upstreams.others`): a URL, taken as written
            _set_path(layer, f"upstreams.others.{upstream[1].lower()}", raw)
            continue
        elif "__" in name:
            dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
        else:
            raise ConfigError(f"{name}: unknown environment variable (use RUNGUARD_SECTION__FIELD)")
        value: Any = raw if is_text_setting(dotted) else _parse_env_value(raw)
        _set_path(layer, dotted, value)
    return layer


def read_text(path: str | os.PathLike[str], key: str) -> str:
    """A UTF-8 file's text; a ConfigError naming `key` when it cannot be read (missing, a directory, binary)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{key}: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def yaml_layer(path: str | os.PathLike[str], key: str) -> dict[str, Any]:
    text = read_text(path, key)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"])
        lines.append(f"{key}: {item['msg']}")
    return "; ".join(lines)


def load_settings(
    *,
    config_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    cli: Mapping[str, Any] | None = None,
    validate_detectors: DetectorValidator | None = None,
) -> LoadedSettings:
    """Merge the layers, validate, and report where each value came from."""
    environ = os.environ if environ is None else environ
    file_key = "--config"
    if config_file is None and environ.get("RUNGUARD_CONFIG"):
        config_file, file_key = environ["RUNGUARD_CONFIG"], "RUNGUARD_CONFIG"
    layers: list[tuple[str, dict[str, Any]]] = []
    if config_file is not None:
        layers.append((f"file:{config_file}", yaml_layer(config_file, file_key)))
    layers.append(("env", env_layer(environ)))
    cli_layer: dict[str, Any] = {}
    for dotted, value in (cli or {}).items():
        if value is not None:
            _set_path(cli_layer, dotted, value)
    layers.append(("cli", cli_layer))

    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, layer in layers:
        merged = _merge(merged, layer)
        for dotted in _flatten(layer):
            sources[dotted] = source
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from exc
    placeholders = placeholder_secrets(settings)
    if placeholders:
        raise ConfigError(
            f"{', '.join(placeholders)}: a placeholder (such as change-me) where a secret belongs; "
            "set a long random value of your own"
        )
    if validate_detectors is not None:
        _check_detectors(settings, validate_detectors)
    return LoadedSettings(settings=settings, sources=sources)


def _check_detectors(settings: Settings, validate: DetectorValidator) -> None:
    scopes: list[tuple[str, dict[str, dict[str, Any]]]] = [("guard.detectors", settings.guard.detectors)]
    scopes += [(f"guard.overrides.{i}.detectors", o.detectors) for i, o in enumerate(settings.guard.overrides)]
    for prefix, detectors in scopes:
        for name, values in detectors.items():
            try:
                validate(name, values)
            except ConfigError as exc:
                raise ConfigError(f"{prefix}.{exc}") from exc
