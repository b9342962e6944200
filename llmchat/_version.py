"""The package version, in a module of its own so the transport can name it without a cycle."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.2.0"
