"""Model tables: price per token and context window, by exact model id (`resolve`).

The shipped tables live in `runguard.config` (pricing.yaml, models.yaml); a
user file extends or overrides them. Lookups are cached per model name. A model
no table knows has no price (it is *unpriced*: `bill` is None, and it adds
nothing to a budget) and no window (no `context_window` limit), unless a user
file sets a `default:`; it never gets another model's row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any, TypeVar

import yaml

from runguard.config import ConfigError, load_yaml, read_text
from runguard.proxy.core.events import Usage
from runguard.proxy.core.frozen import frozen

T = TypeVar("T")
FINE_TUNED = "ft:"  # OpenAI's fine-tuned models: ft:gpt-4.1-mini-2025-04-14:acme:support:AbC123


@frozen
class Price:
    """USD per 1M tokens.

    `long`: the rates of a request whose prompt is over `long_above` tokens, for
    the whole request, output included (Gemini's Pro models charge about twice
    as much past 200k: a budget counted at the short rates let a long-context
    run spend twice its cap). `audio`: the rates of the audio tokens, for the
    models that price them apart (8 to 16 times the text rates at OpenAI, about
    3 times on Gemini's Flash models); its `cached_input` is the rate of the
    cached audio tokens, a hundredth of the audio rate or less at OpenAI (a
    voice call's turns re-send the call so far, mostly from the cache).
    `cache_write` and `cache_write_1h`: the rates of input written to a prompt
    cache for 5 minutes and for an hour (Anthropic charges 1.25 and 2 times
    the input rate); None: the input rate (providers that do not charge writes).
    """

    input: float
    cached_input: float
    output: float
    long: Price | None = None
    long_above: int = 0
    audio: Price | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None

    def cost(self, usage: Usage) -> float:
        rates = self.long if self.long is not None and usage.input_tokens > self.long_above else self
        heard = spoken = recalled = 0
        usd = 0.0
        if self.audio is not None:
            heard = min(usage.audio_input_tokens, usage.input_tokens)
            spoken = min(usage.audio_output_tokens, usage.output_tokens)
            recalled = min(usage.cached_audio_tokens, usage.cached_tokens, heard)
            audio = self.audio
            usd = (heard - recalled) * audio.input + recalled * audio.cached_input + spoken * audio.output
        text_in = usage.input_tokens - heard
        cached = min(usage.cached_tokens - recalled, text_in)
        hour = min(usage.cache_write_1h_tokens, text_in - cached)
        written = min(usage.cache_write_tokens, text_in - cached - hour)
        usd += (text_in - cached - hour - written) * rates.input + cached * rates.cached_input
        usd += written * _rate(rates.cache_write, rates.input) + hour * _rate(rates.cache_write_1h, rates.input)
        return (usd + (usage.output_tokens - spoken) * rates.output) / 1_000_000


def _rate(rate: float | None, otherwise: float) -> float:
    return otherwise if rate is None else rate


def _user_file(path: str, key: str) -> dict[str, Any]:
    """A user's table file: `models:` (name: entry), optionally `default:` (and a pricing file's `tools:` and
    `service_tiers:`); a ConfigError naming `key` if not."""
    try:
        data = load_yaml(read_text(path, key)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{key}: {path} is not valid YAML: {exc}") from exc
    prices = key == "pricing_file"
    allowed = {"models", "default", "tools", "service_tiers"} if prices else {"models", "default"}
    shaped = isinstance(data, dict) and set(data) <= allowed
    if not shaped or not isinstance(data.get("models") or {}, dict):
        optional = "`default:`, `tools:` and `service_tiers:`" if prices else "`default:`"
        raise ConfigError(f"{key}: {path} must be a mapping of `models:` (model name: entry) and optionally {optional}")
    return data


def _load(shipped: str, extra: str | None, key: str) -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(resources.files("runguard.config").joinpath(shipped).read_text("utf-8"))
    if extra:
        user = _user_file(extra, key)
        data["models"] = {**data.get("models", {}), **(user.get("models") or {})}
        data["default"] = user.get("default", data.get("default"))
        for table in ("tools", "service_tiers"):
            extra_rows = user.get(table)
            if isinstance(extra_rows, dict):
                data[table] = {**data.get(table, {}), **extra_rows}
            elif extra_rows is not None:
                data[table] = extra_rows  # refused when read, naming the setting
    return data


# What may follow a model's id in a dated or versioned id of the same model: `-2024-08-06`, `-0613`,
# `-20241022`, `-001`, `-preview-05-20`, `-latest`, `-exp-1206`, `@20250929` (Vertex), `-v2:0` (Bedrock).
# Not a single digit after `-` (`claude-opus-4-9` is another model than `claude-opus-4`), nor a word
# (`gpt-4o-mini-tts`, `gpt-5-codex`, `gpt-4.5-preview`: other models).
_VERSION = re.compile(r"(?:[-_@]\d{2,}|[-_@.](?:preview|latest|exp)|[-_@]v\d+(?:\.\d+)?|:\d+)+")
# Namespaces a client or router puts before a model's id (Gemini's `models/`, OpenRouter's and LiteLLM's
# `google/gemini-3-pro-preview`): the id after them is the model's.
_PREFIXES = ("models/", "google/", "openai/", "anthropic/", "gemini/")


def _known_name(model: str) -> str:
    name = model.lower()
    for prefix in _PREFIXES:
        name = name.removeprefix(prefix)
    return name


def resolve(names: Iterable[str], model: str) -> str | None:
    """The table name `model` is: its exact name, else the longest name it extends by version tokens only
    (`_VERSION`: a date, a snapshot number, preview/latest/exp). None when no name fits: never a bare prefix of
    another model's name. Fine-tuned models (`ft:<base>:<org>:<suffix>:<id>`) match a name that is their own
    up to a `:` (a user's row for one fine-tune), else `ft:` and their base's name."""
    name = _known_name(model)
    best: str | None = None
    size = -1
    for key in names:
        known = key.lower()
        if known == name:
            return key
        if len(known) > size and name.startswith(known) and _extends(name[len(known) :], known):
            best, size = key, len(known)
    return best


def _extends(rest: str, known: str) -> bool:
    if known.startswith(FINE_TUNED) and rest.startswith(":"):
        return True  # a fine-tune's own row: `ft:<base>:<org>:<suffix>` names every model of that run
    if known.startswith(FINE_TUNED):
        rest = rest.split(":", 1)[0]  # `ft:<base>`'s base, dated: the org and id that follow are no version
    return _VERSION.fullmatch(rest) is not None


def _base_of(model: str) -> str | None:
    """A fine-tuned model's base model (`ft:gpt-4o-mini-2024-07-18:acme::C2` -> `gpt-4o-mini-2024-07-18`)."""
    name = _known_name(model)
    return name.removeprefix(FINE_TUNED).split(":", 1)[0] if name.startswith(FINE_TUNED) else None


def _rates(raw: Any, shape: str) -> Price:
    if not isinstance(raw, dict) or "input" not in raw or "output" not in raw:
        raise ValueError(f"expected {shape}")
    cached = raw["cached_input"] if "cached_input" in raw else raw["input"]
    writes = [None if raw.get(name) is None else float(raw[name]) for name in ("cache_write", "cache_write_1h")]
    price = Price(
        float(raw["input"]), float(cached), float(raw["output"]), cache_write=writes[0], cache_write_1h=writes[1]
    )
    if not min(price.input, price.cached_input, price.output, *(w for w in writes if w is not None)) >= 0:
        raise ValueError("prices must be numbers >= 0")
    return price


def _price(raw: Any) -> Price:
    price = _rates(
        raw,
        "{input: USD, output: USD} per 1M tokens, optionally cached_input, cache_write, cache_write_1h,"
        " long_context and audio",
    )
    long, above = _long_context(raw.get("long_context"))
    audio = raw.get("audio")
    if audio is not None:
        audio = _rates(audio, "audio: {input: USD, output: USD} per 1M audio tokens")
    return Price(
        price.input, price.cached_input, price.output, long, above, audio, price.cache_write, price.cache_write_1h
    )


def _long_context(raw: Any) -> tuple[Price | None, int]:
    """A `long_context` entry's rates and threshold; (None, 0) if there is none."""
    if raw is None:
        return None, 0
    shape = "long_context: {above_tokens: N, input: USD, output: USD}, optionally cached_input and cache writes"
    above = raw.get("above_tokens") if isinstance(raw, dict) else None
    if not isinstance(above, int) or isinstance(above, bool) or above <= 0:
        raise ValueError(f"expected {shape}, above_tokens a whole number > 0")
    return _rates(raw, shape), above


def _numbers(raw: Any, shape: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ValueError(f"expected {shape}")
    found: dict[str, float] = {}
    for name, number in raw.items():
        if not isinstance(number, int | float) or isinstance(number, bool) or not number >= 0:
            raise ValueError(f"expected {shape}, each a number >= 0 ({name}: {number!r})")
        found[str(name)] = float(number)
    return found


def _fees(raw: Any) -> dict[str, float]:
    return _numbers(raw, "a mapping of tool: USD per 1k calls")


def _factors(raw: Any) -> dict[str, float]:
    return _numbers(raw, "a mapping of service tier: factor of the token prices")


def _window(raw: Any) -> int:
    size = int(raw) if isinstance(raw, int | str) and not isinstance(raw, bool) else 0
    if size <= 0:
        raise ValueError("expected a context window in tokens, a whole number > 0")
    return size


def _entry(parse: Callable[[Any], T], raw: Any, key: str, where: str) -> T:
    try:
        return parse(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: {where}: {exc}") from exc


class ModelTables:
    def __init__(self, pricing_file: str | None = None, models_file: str | None = None) -> None:
        pricing = _load("pricing.yaml", pricing_file, "pricing_file")
        windows = _load("models.yaml", models_file, "models_file")
        self._prices = {
            str(name): _entry(_price, raw, "pricing_file", f"models.{name}") for name, raw in pricing["models"].items()
        }
        shipped = pricing.get("default")
        self._default_price = None if shipped is None else _entry(_price, shipped, "pricing_file", "default")
        self._windows = {
            str(name): _entry(_window, raw, "models_file", f"models.{name}") for name, raw in windows["models"].items()
        }
        size = windows.get("default")
        self._default_window = 0 if size is None else _entry(_window, size, "models_file", "default")
        self._tool_fees = _entry(_fees, pricing.get("tools") or {}, "pricing_file", "tools")
        self._tiers = _entry(_factors, pricing.get("service_tiers") or {}, "pricing_file", "service_tiers")
        self._price_cache: dict[str, Price | None] = {}
        self._window_cache: dict[str, int] = {}
        # A requested name -> (the model its last response named, the name it is priced and sized by).
        self._served: dict[str, tuple[str, str]] = {}

    def served(self, requested: str, served: str | None) -> None:
        """Learn that `requested` is served by the model `served` (a response's `model`).

        From then on `requested` is priced and sized as `served` when the tables
        know `served`: an Azure OpenAI deployment is asked for by its own name
        ("prod-chat"), which no table knows, and its responses name the model
        ("gpt-4o-mini-2024-07-18"). A name OpenAI answers with a dated version of
        itself keeps its entry.
        """
        known = self._served.get(requested)
        if not served or (known is not None and known[0] == served):
            return
        if len(self._served) > 4096:  # model names come from clients: stay bounded
            self._served.clear()
        priced = resolve(self._prices, served) is not None
        self._served[requested] = (served, served if priced else requested)
        self._price_cache.pop(requested, None)
        self._window_cache.pop(requested, None)

    def _named(self, model: str) -> str:
        known = self._served.get(model)
        return model if known is None else known[1]

    def price(self, model: str) -> Price | None:
        """The model's rates; None when no table knows it (unpriced)."""
        if model in self._price_cache:
            return self._price_cache[model]
        name = resolve(self._prices, self._named(model))
        found = self._prices[name] if name is not None else self._default_price
        if len(self._price_cache) > 4096:  # model names come from clients: stay bounded
            self._price_cache.clear()
        self._price_cache[model] = found
        return found

    def window(self, model: str) -> int:
        """The model's context window; 0 (no limit) when no table knows it. A fine-tuned model
        (`ft:<base>:<org>:<suffix>:<id>`) has its base's, unless a table names it."""
        found = self._window_cache.get(model)
        if found is None:
            named = self._named(model)
            name = resolve(self._windows, named)
            base = _base_of(named) if name is None else None
            if base is not None:
                name = resolve(self._windows, base)
            found = self._windows[name] if name is not None else self._default_window
            if len(self._window_cache) > 4096:
                self._window_cache.clear()
            self._window_cache[model] = found
        return found

    def bill(self, model: str, usage: Usage | None) -> float | None:
        """What the response cost in USD; None when the model is unpriced (and used tokens)."""
        if usage is None:
            return 0.0
        price = self.price(model)
        if price is None:
            return None if usage.input_tokens or usage.output_tokens or usage.tool_calls else 0.0
        tokens = price.cost(usage)
        if usage.service_tier is not None:
            tokens *= self._tiers.get(usage.service_tier, 1.0)
        if not usage.tool_calls:
            return tokens
        fees = self._tool_fees
        return tokens + sum(fees.get(tool, 0.0) * count for tool, count in usage.tool_calls) / 1000

    def cost(self, model: str, usage: Usage | None) -> float:
        """`bill`, with an unpriced response as 0.0: what it adds to the run's and key's spend, which a budget
        caps (a price that is not known is not guessed: another model's could be ten times too high)."""
        usd = self.bill(model, usage)
        return 0.0 if usd is None else usd
