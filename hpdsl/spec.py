"""What is left of the language's Python tables while they move to hpdsl/model/: the axes."""

from __future__ import annotations

AXES = ("tp", "cp", "ep", "pp")
"""The mesh axes a family condition may name; `parallel` is the family axis > 1."""
