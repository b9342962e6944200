"""The routing config: nodes, model aliases with their tiers, client keys, routing options.

`load_config(path)` reads a YAML or JSON file, `parse_config(data)` the data
already read; both check it against the JSON Schema that ships in the package
(``config.schema.json``) and then what a schema cannot say (`config_checks`),
and either return a frozen `RoutingConfig` or raise one `ConfigError` listing
every problem, each naming its path. Neither reads the environment: keys are
resolved where they are used (`keys.KeyRing`, the nodes), so a config and its
repr never hold a secret.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...errors import InvalidArgumentError
from .config_checks import config_errors

__all__ = [
    "DIALECTS",
    "AdminOptions",
    "Budget",
    "BudgetOptions",
    "ConfigError",
    "KeyPolicy",
    "NodeConfig",
    "Price",
    "RoutingConfig",
    "RoutingOptions",
    "Tier",
    "load_config",
    "parse_config",
]

DIALECTS = ("openai", "anthropic", "responses", "ollama", "gemini")
"""The wires a node may speak: llmchat's backends."""

_YAML_MISSING = (
    "not JSON, so read as YAML, which needs PyYAML: pip install 'llmchat[proxy]' "
    "(or write the config as JSON)"
)


@dataclass(frozen=True)
class NodeConfig:
    """One upstream server."""

    name: str
    """Unique; what ``x-llmchat-node`` and usage events report."""
    url: str
    """The node's base URL, as its dialect's backend takes it (``http://host:8080/v1``)."""
    dialect: str = "openai"
    """One of `DIALECTS`."""
    api_key_env: str | None = None
    """The environment variable holding the node's own key (never a client's); None: no key."""
    max_conns: int | None = None
    """Requests in flight at once; None: a llama-server's slot count (``/props``), else 8."""
    weight: int = 1
    """Its share in the weighted round-robin among admitted nodes."""


@dataclass(frozen=True)
class Tier:
    """One step of an alias: an upstream model on some nodes, tried in order of tiers."""

    model: str
    """The upstream model name sent to the node."""
    nodes: tuple[str, ...]
    """Names of `NodeConfig`s that serve it."""
    wait_ms: int | None = None
    """How long a request waits for admission in this tier; None: the routing option's
    `RoutingOptions.wait_timeout_ms`."""


@dataclass(frozen=True)
class Budget:
    """What one client key may spend per `period`: tokens, cost, requests per minute.

    Each limit is optional; a request is refused (before any upstream call)
    once the key's spend in the current period reached one of them.
    """

    period: str = "day"
    """``day``, ``week`` (from Monday) or ``month``, in UTC."""
    cost: float | None = None
    """The most the key's requests may cost in a period (the `prices`' currency)."""
    tokens: int | None = None
    """The most input plus output tokens in a period."""
    rpm: int | None = None
    """The most requests in any minute."""


@dataclass(frozen=True)
class KeyPolicy:
    """A client key: its name (the usage events' ``key_id``), where it is, what it may ask for."""

    name: str
    key_env: str
    """The environment variable holding the key."""
    models: tuple[str, ...] | None = None
    """Allowed client model names or fnmatch globs; None: every model."""
    budget: Budget | None = None
    """What the key may spend; None: no limit."""


@dataclass(frozen=True)
class Price:
    """A model's price per million tokens of each kind (the config's one currency)."""

    input: float = 0.0
    """Input tokens not read from the cache."""
    output: float = 0.0
    """Output tokens, reasoning included."""
    cache_read: float | None = None
    """Input tokens read from the prompt cache; None: the `input` price."""
    cache_write: float | None = None
    """Input tokens written to the prompt cache; None: the `input` price."""


@dataclass(frozen=True)
class AdminOptions:
    """The operator's access: ``/admin/`` and ``/metrics`` need this key (absent: 404)."""

    key_env: str
    """The environment variable holding the admin key."""


@dataclass(frozen=True)
class BudgetOptions:
    """How budgets are checked."""

    refresh_s: float = 5.0
    """How stale a key's spend, read from the usage store, may be (seconds); 0: re-read on
    every check (the tightest bound on overshoot, one store query per request)."""


@dataclass(frozen=True)
class RoutingOptions:
    """How requests wait and where they go."""

    wait_timeout_ms: int = 2000
    """How long a request waits for an admitted slot before the next tier (or a 429)."""
    affinity: str = "prefix"
    """``prefix``: a conversation's turns go to the node holding its prefix; ``none``."""
    health_interval_s: float = 5.0
    """Seconds between two health probes of a node."""


@dataclass(frozen=True)
class RoutingConfig:
    """A whole checked config. Holds no secret: keys are named by their variables."""

    nodes: tuple[NodeConfig, ...]
    models: Mapping[str, tuple[Tier, ...]]
    """Client-facing name or glob -> ordered tiers, in the file's order (read-only)."""
    keys: tuple[KeyPolicy, ...] = ()
    routing: RoutingOptions = field(default_factory=RoutingOptions)
    admin: AdminOptions | None = None
    """The admin key's variable; None: no ``/admin/`` (404) and an open ``/metrics``."""
    prices: Mapping[str, Price] = field(default_factory=lambda: MappingProxyType({}))
    """Model name or fnmatch glob -> its price, in the file's order (read-only)."""
    budgets: BudgetOptions = field(default_factory=BudgetOptions)
    source: str = "<config>"
    """The file it came from."""
    digest: str = ""
    """sha256 (hex) of the file's bytes: which config is live, for ``/health``."""

    def node(self, name: str) -> NodeConfig:
        """The node called `name`; KeyError if there is none."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)


class ConfigError(InvalidArgumentError):
    """A routing config that cannot be used; `errors` lists every problem, each naming its path."""

    def __init__(self, errors: Sequence[str], source: str = "<config>") -> None:
        self.errors = list(errors)
        self.source = source
        count = f"{len(self.errors)} error{'s' if len(self.errors) != 1 else ''}"
        super().__init__(f"{source}: {count}:\n" + "\n".join(f"  {e}" for e in self.errors))


def parse_config(data: object, source: str = "<config>", digest: str = "") -> RoutingConfig:
    """`data` (parsed YAML or JSON) as a `RoutingConfig`; `ConfigError` lists all its problems."""
    errors = config_errors(data)
    if errors:
        raise ConfigError(errors, source)
    assert isinstance(data, Mapping)  # the schema says so
    return RoutingConfig(
        nodes=tuple(NodeConfig(**node) for node in data["nodes"]),
        models=MappingProxyType(
            {alias: tuple(_tier(t) for t in tiers) for alias, tiers in data["models"].items()}
        ),
        keys=tuple(_key(k) for k in data.get("keys", ())),
        routing=RoutingOptions(**data.get("routing", {})),
        admin=AdminOptions(**data["admin"]) if "admin" in data else None,
        prices=MappingProxyType({name: Price(**p) for name, p in data.get("prices", {}).items()}),
        budgets=BudgetOptions(**data.get("budgets", {})),
        source=source,
        digest=digest,
    )


def load_config(path: str | os.PathLike[str]) -> RoutingConfig:
    """The routing config in file `path` (YAML; JSON by its ``.json`` name or its content).

    Reads the file and nothing else (no network, no environment). A file
    that cannot be read or parsed, or that fails a check, raises
    `ConfigError` naming the file and every problem.
    """
    source = os.fspath(path)
    try:
        raw = Path(source).read_bytes()
    except OSError as exc:
        raise ConfigError([f"cannot read the file: {exc.strerror or exc}"], source) from None
    data = read_document(raw, source)
    return parse_config(data, source, hashlib.sha256(raw).hexdigest())


def read_document(raw: bytes, source: str) -> object:
    """File bytes as data: JSON when named ``.json`` or when it parses as JSON, else YAML."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"not UTF-8 (byte {exc.start})"], source) from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        if source.endswith(".json"):
            where = f"line {exc.lineno}, column {exc.colno}"
            raise ConfigError([f"{where}: not valid JSON: {exc.msg}"], source) from None
    except _DuplicateKey as exc:
        raise ConfigError([str(exc)], source) from None
    return _read_yaml(text, source)


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key named twice (json keeps the last, silently)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(f"duplicate key {key!r} in one object")
        result[key] = value
    return result


def _read_yaml(text: str, source: str) -> object:
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise ConfigError([_YAML_MISSING], source) from None
    try:
        return yaml.load(text, Loader=_unique_key_loader(yaml))
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc)], source) from None


def _unique_key_loader(yaml: Any) -> Any:
    """PyYAML's safe loader, refusing a mapping that names a key twice (PyYAML keeps the last)."""

    class UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[object] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def _yaml_problem(exc: Any) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"not valid YAML: {problem}"
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _tier(data: Mapping[str, Any]) -> Tier:
    return Tier(model=data["model"], nodes=tuple(data["nodes"]), wait_ms=data.get("wait_ms"))


def _key(data: Mapping[str, Any]) -> KeyPolicy:
    models = data.get("models")
    budget = data.get("budget")
    return KeyPolicy(
        name=data["name"],
        key_env=data["key_env"],
        models=None if models is None else tuple(models),
        budget=None if budget is None else Budget(**budget),
    )
