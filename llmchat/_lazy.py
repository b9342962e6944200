"""Lazy re-exports: a package names its public names, each imported when first asked for.

`import llmchat` is paid by every script and command line that uses it, so
the package's ``__init__`` imports nothing heavy: a name such as `Anthropic`
is looked up in its home module only when code asks for it (``from llmchat
import Anthropic``, or ``llmchat.Anthropic``), through the module-level
``__getattr__`` of PEP 562 that `exports` builds. The value is then stored
on the package, so the next lookup is an ordinary attribute read.

Type checkers do not run ``__getattr__``: a package imports the same names
under ``if TYPE_CHECKING:`` and defines ``__getattr__`` only when not type
checking, so a misspelt name is still an error rather than `Any`.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # not `typing`'s: `import llmchat` alone should not load typing
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["exports"]


def exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of `package`, whose public names live in `homes`.

    `homes` maps each name to the module it is imported from, relative to
    `package` (``".backends.anthropic"``); a name whose home ends in the name
    itself (``"wire_json": ".wire_json"``) is that submodule.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home, package)
        value = module if home.rpartition(".")[2] == name else getattr(module, name)
        setattr(sys.modules[package], name, value)  # the next lookup skips this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
