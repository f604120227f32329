"""Constructors for hand-made test families (allowed with the prefix "torch_fixture_modules")."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.nn import Linear  # noqa: F401 - imported, not defined here: refused as a factory


class Plain(nn.Module):
    """Takes a config and one extra argument."""

    def __init__(self, config: Any, *, width: int = 1) -> None:
        super().__init__()
        self.config, self.width = config, width


class Everything(nn.Module):
    """Names every runtime argument and a selector."""

    def __init__(self, config: Any = None, *, module: nn.Module | None = None, module_fqn: str = "",
                 context: Any = None, level: int = 0) -> None:
        super().__init__()
        self.config, self.module_fqn, self.context, self.level = config, module_fqn, context, level
        self.source = module


class CatchAll(nn.Module):
    """Accepts anything through **kwargs, which names nothing."""

    def __init__(self, config: Any, **kwargs: Any) -> None:
        super().__init__()


class NoConfig(nn.Module):
    """Names neither config nor module."""

    def __init__(self, width: int = 1) -> None:
        super().__init__()


class Failing(nn.Module):
    """Refuses its config."""

    def __init__(self, config: Any) -> None:
        raise ValueError("this config is no good")


def not_a_module(config: Any) -> object:
    """Returns something that is not an nn.Module."""
    return object()


NOT_CALLABLE = 3
