"""Loading a routing config with its environment, and re-reading it on SIGHUP.

`load_routing` is what start-up and every reload do: the file (`load_config`),
the client keys it names (`keys.KeyRing`, every problem a `ConfigError`), and
the nodes whose own key is not set, which are not config errors (such a node
is not eligible, as the issue says) but must be seen: they come back as
warnings to log. `reload_from` is the SIGHUP handler's body, without the
signal: a valid file goes to the routed upstream's ``reload``, an invalid one
is logged error by error at WARNING and the old config stays.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ...errors import InvalidArgumentError
from ...redact import check_secret
from .config import ConfigError, RoutingConfig, load_config
from .keys import KeyRing, resolve_secret

__all__ = [
    "Loaded",
    "ReloadStatus",
    "Reloadable",
    "load_routing",
    "node_key_warnings",
    "reload_from",
]


class Reloadable(Protocol):
    """What `reload_from` hands a new config to (`RoutedUpstream`)."""

    def reload(self, config: RoutingConfig) -> Any: ...


@dataclass(frozen=True)
class Loaded:
    """A routing config ready to serve: the config, its client keys, what to warn about."""

    config: RoutingConfig
    keys: KeyRing | None
    """None when the config names no keys (the single proxy key, if any, applies)."""
    warnings: tuple[str, ...] = ()
    """Nodes that are not eligible because their key is not set, each naming its path."""
    admin_key: str | None = None
    """The operator's key (``admin.key_env``), resolved; None when the config names none."""

    def __repr__(self) -> str:  # the admin key is a secret
        admin = "set" if self.admin_key else None
        return f"Loaded({self.config!r}, keys={self.keys!r}, admin_key={admin})"


@dataclass(frozen=True)
class ReloadStatus:
    """The last reload attempt, for ``GET /admin/config``: when, whether it took, and why not.

    The errors are the config's own (each naming a path or a variable, never a
    value), the lines the reload logged.
    """

    at: float
    """Unix time of the attempt."""
    outcome: str
    """``ok`` or ``refused`` (the old config stays)."""
    source: str
    digest: str | None = None
    """The new config's sha256 when it took; None when refused."""
    errors: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "outcome": self.outcome,
            "source": self.source,
            "digest": self.digest,
            "errors": list(self.errors),
        }


def load_routing(path: str | os.PathLike[str], environ: Mapping[str, str]) -> Loaded:
    """The config in `path` with its keys resolved from `environ`; `ConfigError` otherwise.

    The file's problems come first, all at once; the keys' (an unset or
    malformed variable) once the file is valid.
    """
    config = load_config(path)
    errors: list[str] = []
    try:
        keys = KeyRing(config.keys, environ) if config.keys else None
    except ConfigError as exc:
        errors, keys = list(exc.errors), None
    admin_key = None
    if config.admin is not None:
        value, problem = resolve_secret("admin.key_env", config.admin.key_env, environ)
        if problem is not None:
            errors.append(problem)
        admin_key = value.decode("utf-8") or None
    if errors:
        raise ConfigError(errors, config.source)
    return Loaded(config, keys, tuple(node_key_warnings(config, environ)), admin_key)


def node_key_warnings(config: RoutingConfig, environ: Mapping[str, str]) -> list[str]:
    """Each node whose `api_key_env` is unset or malformed: it is not eligible while so."""
    warnings = []
    for i, node in enumerate(config.nodes):
        if node.api_key_env is None:
            continue
        where = f"nodes[{i}].api_key_env: {node.api_key_env}"
        value = environ.get(node.api_key_env) or None
        problem = "is not set" if value is None else None
        try:
            check_secret(where, value)
        except InvalidArgumentError as exc:
            problem = str(exc).removeprefix(where).lstrip()
        if problem:
            warnings.append(f"{where} {problem}; node {node.name!r} is not eligible")
    return warnings


def reload_from(
    path: str | os.PathLike[str],
    routed: Reloadable,
    log: logging.Logger,
    *,
    environ: Mapping[str, str] | None = None,
    on_keys: Callable[[KeyRing | None], None] | None = None,
    on_status: Callable[[ReloadStatus], None] | None = None,
) -> Loaded | None:
    """Re-read `path`; a valid config goes to `routed.reload` (and its keys to `on_keys`).

    Returns what was loaded, or None when the file was refused: then every
    error is logged on `log` at WARNING, one line each, and nothing changes.
    Never raises (it runs in a signal handler, where an exception would stop
    the server). Each attempt's outcome goes to `on_status`.
    """
    source = os.fspath(path)
    status = on_status if on_status is not None else (lambda status: None)
    try:
        loaded = load_routing(source, os.environ if environ is None else environ)
    except ConfigError as exc:
        for error in exc.errors:
            log.warning("routing config %s refused, the old one stays: %s", exc.source, error)
        status(ReloadStatus(time.time(), "refused", source, errors=tuple(exc.errors)))
        return None
    try:
        routed.reload(loaded.config)
    except Exception as exc:  # the routed upstream's own refusal; the old config stays
        log.warning("routing config %s refused, the old one stays: %s", source, exc)
        status(ReloadStatus(time.time(), "refused", source, errors=(str(exc),)))
        return None
    if on_keys is not None:
        on_keys(loaded.keys)
    status(ReloadStatus(time.time(), "ok", source, loaded.config.digest))
    for warning in loaded.warnings:
        log.warning("routing config %s: %s", source, warning)
    return loaded
