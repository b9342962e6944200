"""The routing configuration's shapes (the shared interface of issue 27).

This file holds the dataclasses only; the loader and the schema belong to the
config module that replaces it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "DIALECTS",
    "ConfigError",
    "KeyPolicy",
    "NodeConfig",
    "RoutingConfig",
    "RoutingOptions",
    "Tier",
    "load_config",
    "parse_config",
]

DIALECTS = ("openai", "anthropic", "responses", "ollama", "gemini")


@dataclass(frozen=True)
class NodeConfig:
    name: str
    url: str
    dialect: str = "openai"
    api_key_env: str | None = None
    max_conns: int | None = None
    weight: int = 1


@dataclass(frozen=True)
class Tier:
    model: str
    nodes: tuple[str, ...]
    wait_ms: int | None = None


@dataclass(frozen=True)
class KeyPolicy:
    name: str
    key_env: str
    models: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RoutingOptions:
    wait_timeout_ms: int = 2000
    affinity: str = "prefix"


@dataclass(frozen=True)
class RoutingConfig:
    nodes: tuple[NodeConfig, ...]
    models: Mapping[str, tuple[Tier, ...]]
    keys: tuple[KeyPolicy, ...] = ()
    routing: RoutingOptions = RoutingOptions()
    source: str = "<config>"
    digest: str = ""


class ConfigError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def parse_config(data: object, source: str = "<config>") -> RoutingConfig:
    raise NotImplementedError("the config helper's module")


def load_config(path: str | os.PathLike[str]) -> RoutingConfig:
    raise NotImplementedError("the config helper's module")
