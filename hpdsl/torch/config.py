"""The config reference modules build from: hpdsl.slots.ModuleConfig, re-exported here for the torch side.

It lives in hpdsl/slots.py (no torch there) because the layout check evaluates
a family's layout dims against the very configs the backend builds modules from.
"""

from __future__ import annotations

from hpdsl.slots import ModuleConfig

__all__ = ["ModuleConfig"]
