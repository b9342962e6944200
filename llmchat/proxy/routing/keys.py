"""Client keys: which configured key a request presented, and which models it may ask for.

`KeyRing` reads each policy's environment variable once, when it is built,
and refuses (`ConfigError`, every problem named by its path) a variable that
is unset, empty or malformed, and two policies holding the same key: a
config that names keys but whose keys do not resolve would otherwise leave
clients refused with a 401 and nobody told why. The keys themselves are
kept only as bytes to compare; no repr, str or error carries one.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from ...errors import InvalidArgumentError
from ...redact import check_secret

if TYPE_CHECKING:
    # Only a type here: every request's policy check (`refusal`) runs in the
    # one-upstream proxy too, which should not load the config's schema checks.
    from .config import KeyPolicy

__all__ = ["FORBIDDEN_TYPE", "KEY_POLICY", "KeyRing", "allows", "refusal", "resolve_secret"]

KEY_POLICY = "llmchat.key_policy"
"""The WSGI environ key under which the app leaves the `KeyPolicy` a request presented."""


def allows(policy: KeyPolicy, model: str) -> bool:
    """Whether `policy` lets its key ask for client model name `model`.

    The policy's names are fnmatch globs, matched case-sensitively; None allows every model.
    """
    if policy.models is None:
        return True
    return any(fnmatchcase(model, pattern) for pattern in policy.models)


FORBIDDEN_TYPE = "forbidden"
"""The usage event's ``error_type`` for a model outside the key's policy (a 403)."""


def refusal(policy: KeyPolicy | None, model: str) -> str | None:
    """The 403's message when `policy` (None: no named key) may not ask for `model`, else None.

    Where the requested model is known, the caller answers
    ``exchange.error(403, message, FORBIDDEN_TYPE)`` (which says
    ``x-should-retry: false``), before choosing any node.
    """
    if policy is None or allows(policy, model):
        return None
    return f"The key {policy.name!r} may not use model {model!r}"


class KeyRing:
    """The client keys of a config, resolved from `environ` once.

    Thread-safe (immutable after construction); the app keeps one per config.
    """

    allows = staticmethod(allows)

    def __init__(self, policies: Sequence[KeyPolicy], environ: Mapping[str, str]) -> None:
        self.policies = tuple(policies)
        entries: list[tuple[bytes, KeyPolicy]] = []
        errors: list[str] = []
        first: dict[bytes, int] = {}
        for i, policy in enumerate(self.policies):
            where = f"keys[{i}].key_env"
            secret, problem = resolve_secret(where, policy.key_env, environ)
            if problem:
                errors.append(problem)
            elif secret in first:
                errors.append(
                    f"{where}: {policy.key_env} holds the same key as keys[{first[secret]}]"
                )
            else:
                first[secret] = i
                entries.append((secret, policy))
        if errors:
            from .config import ConfigError  # loaded already: the policies came from a config

            raise ConfigError(errors, "the environment")
        self._entries = tuple(entries)

    def __repr__(self) -> str:
        return f"KeyRing({', '.join(p.name for p in self.policies)})"

    def __len__(self) -> int:
        return len(self._entries)

    def identify(self, presented: str | None) -> KeyPolicy | None:
        """The policy whose key is `presented`, else None (also for None or an empty string).

        Every key is compared, in constant time each (`hmac.compare_digest`),
        so the time taken says neither which key matched nor how much of one.
        """
        if not presented:
            return None
        offered = presented.encode("utf-8", "surrogatepass")
        found: KeyPolicy | None = None
        for secret, policy in self._entries:
            if hmac.compare_digest(offered, secret) and found is None:
                found = policy
        return found

    def key_id(self, policy: KeyPolicy) -> str:
        """What usage events record for a request that presented `policy`'s key: its name."""
        return policy.name


def resolve_secret(
    where: str, variable: str, environ: Mapping[str, str]
) -> tuple[bytes, str | None]:
    """The secret in `environ[variable]` as bytes, and None; or b"" and the problem (unset,
    malformed), naming `where` and the variable, never the value."""
    value = environ.get(variable) or None
    if value is None:
        return b"", f"{where}: {variable} is not set"
    try:
        check_secret(f"{where}: {variable}", value)
    except InvalidArgumentError as exc:
        return b"", str(exc)
    return value.encode("utf-8"), None
