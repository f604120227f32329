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


# --------------------------------------------------------------------------
# Authors' modules for slots the standard families do not model
# (tests/torch/test_layout_priced_slots.py): each creates exactly what its
# family's layout declares.
# --------------------------------------------------------------------------


class ProjectedEmbedding(nn.Module):
    """OPT-350m's embedding: a (vocab, hidden / 2) table projected up to hidden by project_in (no bias)."""

    def __init__(self, config: Any, **_: Any) -> None:
        super().__init__()
        narrow = config.hidden // 2
        self.table = nn.Embedding(config.vocab, narrow)
        self.project_in = nn.Linear(narrow, config.hidden, bias=False)

    def forward(self, ids: Any) -> Any:
        """Return the projected embeddings of `ids`."""
        return self.project_in(self.table(ids))


class ChannelMix(nn.Module):
    """RWKV-4's channel mix in the feed-forward slot: token-shift mixes, key, receptance, value."""

    def __init__(self, config: Any, **_: Any) -> None:
        super().__init__()
        import torch

        h, width = config.hidden, config.ffn_width
        self.time_mix_k = nn.Parameter(torch.empty(h))
        self.time_mix_r = nn.Parameter(torch.empty(h))
        self.key = nn.Linear(h, width, bias=False)
        self.receptance = nn.Linear(h, h, bias=False)
        self.value = nn.Linear(width, h, bias=False)

    def forward(self, x: Any) -> Any:
        """Return sigmoid(r) · value(relu(key)²) over the token-shifted input."""
        import torch

        shifted = torch.nn.functional.pad(x, (0, 0, 1, -1))
        k = x * self.time_mix_k + shifted * (1 - self.time_mix_k)
        r = x * self.time_mix_r + shifted * (1 - self.time_mix_r)
        return torch.sigmoid(self.receptance(r)) * self.value(torch.relu(self.key(k)) ** 2)


class ChannelMixWithBias(ChannelMix):
    """A channel mix whose value projection has a bias its family's layout does not declare."""

    def __init__(self, config: Any, **_: Any) -> None:
        super().__init__(config)
        self.value = nn.Linear(config.ffn_width, config.hidden, bias=True)


class ChannelMixWithoutReceptance(ChannelMix):
    """A channel mix lacking the receptance its family's layout declares."""

    def __init__(self, config: Any, **_: Any) -> None:
        super().__init__(config)
        del self.receptance
