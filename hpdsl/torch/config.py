"""The config reference modules build from: hpdsl.bound.config.ModuleConfig, re-exported for the torch side.

It lives in hpdsl/bound/config.py (no torch there) because the layout check
evaluates a family's layout dims against the very configs the backend builds
modules from.
"""

from __future__ import annotations

from hpdsl.bound.config import ModuleConfig

__all__ = ["ModuleConfig"]
