"""How `clone()` rebuilds a subclass without an `_init_kwargs` override.

Every subclass of `OpenAICommon` that defines `__init__` gets it wrapped (by
`OpenAICommon.__init_subclass__`) so that the *outermost* constructor call
records its bound arguments, defaults applied, on the instance. The nested
``super().__init__`` calls record nothing: what a subclass passes on to the
base is the base's business, and `_init_kwargs` reads the base's own
arguments back from its live state.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from ..errors import InvalidTypeError
from ._options import KEEP, base_init_kwargs

__all__ = ["Cloneable", "ConstructorArgs", "accepted_names", "recorded_args", "recording"]

_SLOT: Final = "_constructor_args"
_MARK: Final = "_llmchat_records_args"
_NAMED: Final = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)

_Backend = TypeVar("_Backend", bound="Cloneable")


class Cloneable:
    """`OpenAICommon`'s `clone()`, and the recording of its subclasses' constructors.

    A mixin of the base backend class, which reads its own arguments back
    from its live state (`_options.base_init_kwargs`); each class below it
    that defines `__init__` gets it wrapped by `recording`.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap a subclass's own `__init__` so that `clone()` can rebuild it."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and Cloneable not in cls.__bases__:  # not the base's own
            cls.__init__ = recording(init)  # type: ignore[method-assign]

    def _init_kwargs(self) -> dict[str, Any]:
        """Return the constructor arguments that rebuild this backend, as a new dict.

        The subclass's own arguments as recorded when it was built, then the
        base's read back from the backend (so a changed `model` or `settings`
        is kept); only names the constructor accepts. `clone()` starts from
        this. llmchat calls this; user code does not; override it in a
        subclass only for an argument whose value changes after construction
        (call `super()`, then adjust the copy).
        """
        kwargs = {**recorded_args(self), **base_init_kwargs(self)}
        accepted = accepted_names(type(self))
        return kwargs if accepted is None else {k: v for k, v in kwargs.items() if k in accepted}

    def clone(self: _Backend, **changes: Any) -> _Backend:
        """Return a new backend like this one, with `changes` applied.

        Every constructor argument may be changed, a subclass's own ones
        too; one not named (or given as `KEEP`) is kept. Passing `None` sets
        that argument to None (for a timeout: no limit); an unknown name
        raises `TypeError`.
        """
        kwargs = self._init_kwargs()
        unknown = sorted(set(changes) - set(kwargs))
        if unknown:
            raise InvalidTypeError(f"clone() got unknown argument(s): {', '.join(unknown)}")
        kwargs.update({k: v for k, v in changes.items() if v is not KEEP})
        return type(self)(**kwargs)


class ConstructorArgs:
    """The arguments one backend was built with, by parameter name.

    Values can be credentials, so the repr names the parameters and never
    shows a value. Values are kept as given (not copied).
    """

    __slots__ = ("values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values: dict[str, Any] = dict(values)

    def __repr__(self) -> str:
        return f"ConstructorArgs({', '.join(self.values)})"

    __str__ = __repr__


def recording(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a subclass's `__init__` so that the outermost call records its arguments."""
    if getattr(init, _MARK, False):
        return init
    try:
        signature = inspect.signature(init)
    except (TypeError, ValueError):  # not a plain function: leave it as it is
        return init

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if _SLOT not in vars(self):  # the outermost call; super() calls find it set
            vars(self)[_SLOT] = _bind(signature, self, args, kwargs)
        init(self, *args, **kwargs)

    setattr(__init__, _MARK, True)
    return __init__


def _bind(
    signature: inspect.Signature, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> ConstructorArgs:
    try:
        bound = signature.bind(instance, *args, **kwargs)
    except TypeError:
        return ConstructorArgs({})  # the constructor raises its own error next
    bound.apply_defaults()
    values: dict[str, Any] = {}
    for name, parameter in list(signature.parameters.items())[1:]:  # after self
        if parameter.kind in _NAMED:
            values[name] = bound.arguments[name]
        elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
            values.update(bound.arguments[name])
        # positional-only and *args cannot be passed back by name: not recorded
    return ConstructorArgs(values)


def recorded_args(instance: Any) -> dict[str, Any]:
    """The outermost constructor call's arguments (empty for a class without `__init__`)."""
    recorded = vars(instance).get(_SLOT)
    return dict(recorded.values) if isinstance(recorded, ConstructorArgs) else {}


def accepted_names(cls: type) -> set[str] | None:
    """The keyword names `cls(...)` accepts, or None when it takes ``**kwargs``."""
    parameters = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in _NAMED}
