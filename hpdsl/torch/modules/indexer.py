"""DeepSeek Sparse Attention's lightning indexer, with the parameter shapes of transformers' DeepseekV32Indexer.

For each query the indexer scores every key it may see and keeps the
index_topk best: the MLA attention then attends to those keys only. Its
queries come from MLA's query latent (wq_b: index_n_heads heads of
index_head_dim), its one key per token from the input (wk, then a biased
LayerNorm k_norm); the first rope_dim dims of both are rotary. A query's
score for a key is Σ_h w_h · relu(q_h · k) / √index_head_dim, with per-head
weights w = weights_proj(x) / √index_n_heads (families/mla.hpf's layout).

The top-k selection has no gradient. The indexer learns as DeepSeek-V3.2
trains it (its paper's sparse stage): from the KL divergence between the
main attention's distribution over the selected keys (summed over heads,
normalised, detached) and the indexer's own softmax over them, its inputs
detached from the model's graph, summed over the queries. `with_aux_loss` carries that loss's
gradient into the backward without changing the layer's output or the
model's loss (Megatron's MoEAuxLossAutoScaler does the same for a router).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.modules.rope import Rotary


class Indexer(nn.Module):
    """The lightning indexer of one MLA layer: index scores, the top-k keys, and its KL objective."""

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        heads, dim = config.index_n_heads, config.index_head_dim
        if config.q_lora_rank < 1:
            raise ValueError("a DSA indexer reads the query latent: it needs a positive q_lora_rank")
        if dim < config.rope_dim:
            raise ValueError(f"index_head_dim {dim} is below rope_dim {config.rope_dim}")
        self.config, self.heads, self.dim = config, heads, dim
        self.wq_b = nn.Linear(config.q_lora_rank, heads * dim, bias=False)
        self.wk = nn.Linear(config.hidden, dim, bias=False)
        self.k_norm = nn.LayerNorm(dim, eps=1e-6)
        self.weights_proj = nn.Linear(config.hidden, heads, bias=False)
        self.rotary = Rotary(config, config.rope_dim)

    def keys(self, x: Tensor, positions: Tensor) -> Tensor:
        """Return the index keys [b, s, index_head_dim] of `x` [b, s, h] at `positions`."""
        k = self.k_norm(self.wk(x)).unsqueeze(2)
        return self._rotate(k, positions).squeeze(2)

    def scores(self, x: Tensor, latent: Tensor, keys: Tensor, positions: Tensor) -> Tensor:
        """Return the index scores [b, s, t] (float32) of the queries of `x` and `latent` over `keys` [b, t, d]."""
        batch, seq, _ = x.shape
        q = self._rotate(self.wq_b(latent).view(batch, seq, self.heads, self.dim), positions)
        per_head = F.relu(torch.einsum("bshd,btd->bsht", q.float(), keys.float())) * self.dim ** -0.5
        weights = self.weights_proj(x).float() * self.heads ** -0.5
        return torch.einsum("bsh,bsht->bst", weights, per_head)

    def select(self, scores: Tensor, visible: Tensor) -> Tensor:
        """Return the boolean mask [b, s, t] of each query's index_topk best keys among the `visible` [s, t] ones."""
        masked = scores.detach().masked_fill(~visible, float("-inf"))
        top = masked.topk(min(self.config.index_topk, masked.shape[-1]), dim=-1).indices
        return torch.zeros_like(masked, dtype=torch.bool).scatter(-1, top, True) & visible

    def kl_loss(self, scores: Tensor, selected: Tensor, target: Tensor) -> Tensor:
        """Return the sum over queries of KL(target ‖ softmax of the scores), both over the selected keys.

        A sum, as DeepSeek-V3.2's paper writes the indexer's loss: the gradients of
        ranks holding other sequences or other chunks of one add up to the whole batch's.
        """
        log_q = scores.masked_fill(~selected, float("-inf")).log_softmax(-1)
        log_p = target.clamp_min(torch.finfo(target.dtype).tiny).log()
        terms = torch.where(selected, target * (log_p - log_q), torch.zeros_like(target))
        return terms.sum()

    def _rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        rope = self.config.rope_dim
        return self.rotary(x, positions) if rope else x


class _AuxLoss(torch.autograd.Function):
    """Identity on the output; its backward also gives the auxiliary loss the gradient 1."""

    @staticmethod
    def forward(ctx: Any, out: Tensor, loss: Tensor) -> Tensor:
        ctx.save_for_backward(loss)
        return out.view_as(out)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        (loss,) = ctx.saved_tensors
        return grad, torch.ones_like(loss)


def with_aux_loss(out: Tensor, loss: Tensor) -> Tensor:
    """Return `out` unchanged, with `loss`'s gradient run in the backward (the indexer's KL objective)."""
    result: Tensor = _AuxLoss.apply(out, loss)
    return result


__all__ = ["Indexer", "with_aux_loss"]
