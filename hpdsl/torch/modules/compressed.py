"""Reference module for the `compressed_attention` family: DeepSeek-V4's attention (families/compressed_attention.hpf).

As transformers' DeepseekV4Attention, without a cache (one forward over the whole
sequence): queries through a low-rank latent (q_a_proj, q_a_norm, q_b_proj) and an
unweighted per-head RMSNorm; one shared key-and-value head (kv_proj, kv_norm); rotary on
the last rope_head_dim dims of each head as interleaved pairs (the compressed layers'
at compress_rope_theta, rope_type and its factors, cos and sin unscaled; the sliding
layers' the default rope at rope_theta), turned back on the output; a learnt sink per
head; a sliding window; the grouped low-rank output projection (o_a_proj's o_groups
blocks, then o_b_proj). A layer with compress_ratio > 0 appends its compressor's entries
to the keys (`Compressor`): HCA's non-overlapping windows, or CSA's overlapping ones
whose entries a lightning indexer (`Indexer`) picks indexer_topk of for each query. The
selection has no gradient: the indexer learns from its KL objective to the attention over the
entries it picked (`indexer_kl`, as hpdsl trains DeepSeek-V3.2's indexer), the output unchanged.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.ir.nodes import evolve
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.common import RMSNorm
from hpdsl.torch.modules.indexer import with_aux_loss
from hpdsl.torch.modules.rope import Rotary, frequencies


def unweighted_rms(x: Tensor, eps: float) -> Tensor:
    """Return `x` RMS-normalised over its last dim without a scale (transformers' DeepseekV4UnweightedRMSNorm)."""
    return x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + eps).to(x.dtype)


class TailRotary(Rotary):
    """Interleaved-pair rotary on the last `dim` dims of each head, at one config's frequencies (no scale).

    A Rotary of the whole `dim` (its `frequencies` are the ones turned), applied DeepSeek-V4's way.
    """

    def __init__(self, config: ModuleConfig, dim: int) -> None:
        super().__init__(config, dim)
        self._inverse: dict[str, Tensor] = {}  # per device, made at the first call (a meta build has none)

    def inverse(self, device: torch.device) -> Tensor:
        """Return the inverse frequencies on `device` (DeepSeek-V4 scales cos and sin by 1: attention_factor)."""
        key = str(device)
        if key not in self._inverse:
            self._inverse[key] = frequencies(self.config, self.dim)[0].to(device)
        return self._inverse[key]

    def __call__(self, x: Tensor, positions: Tensor, *, back: bool = False) -> Tensor:
        """Turn `x` [b, s, heads, d]'s last dims at `positions` [s] (or [b, s]); `back` turns the other way."""
        angles = positions[..., None].float() * self.inverse(positions.device)
        cos, sin = angles.cos().repeat_interleave(2, -1), angles.sin().repeat_interleave(2, -1)
        if back:
            sin = -sin
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)  # over the heads
        kept, turned = x[..., :-self.dim], x[..., -self.dim:]
        half = torch.stack((-turned[..., 1::2], turned[..., 0::2]), dim=-1).flatten(-2)
        return torch.cat([kept, (turned.float() * cos + half.float() * sin).to(x.dtype)], dim=-1)


def compressed_config(config: ModuleConfig) -> ModuleConfig:
    """Return the config whose rope the compressed layers turn by: compress_rope_theta, cos and sin unscaled."""
    return evolve(config, rope_theta=float(config.compress_rope_theta), rope_attention_factor=1.0)


class Compressor(nn.Module):
    """A compressed layer's pooling (transformers' HCA/CSA compressor, and the indexer's own): one entry per window.

    Each window of `ratio` tokens becomes the softmax-gated sum of its kv_proj rows (gate_proj
    plus position_bias), RMS-normalised and turned at the window's first position. With
    `overlap` (CSA) each token holds two series, twice `width` wide, and entry w pools window
    w − 1's first series with window w's second.
    """

    def __init__(self, config: ModuleConfig, width: int, ratio: int, *, overlap: bool) -> None:
        super().__init__()
        wide = (2 if overlap else 1) * width
        self.width, self.ratio, self.overlap = width, ratio, overlap
        self.kv_proj = nn.Linear(config.hidden, wide, bias=False)
        self.gate_proj = nn.Linear(config.hidden, wide, bias=False)
        self.position_bias = nn.Parameter(torch.zeros(ratio, wide))
        self.kv_norm = RMSNorm(width, config.norm_eps)

    def reset_parameters(self) -> None:
        """Zero the position bias (transformers' initial value)."""
        with torch.no_grad():
            self.position_bias.zero_()

    def pool(self, x: Tensor, rotary: TailRotary) -> Tensor:
        """Return the entries [b, n, width] of `x` [b, s, h]'s n = s // ratio closed windows (the rest wait)."""
        batch, seq, _ = x.shape
        windows, r = seq // self.ratio, self.ratio
        if windows == 0:
            return x.new_zeros(batch, 0, self.width)
        usable = windows * r
        kv = self.kv_proj(x[:, :usable]).view(batch, windows, r, -1)
        gate = self.gate_proj(x[:, :usable]).view(batch, windows, r, -1) + self.position_bias
        if self.overlap:  # window w: the previous window's first series, then its own second series
            d = self.width
            earlier_kv = torch.cat([kv.new_zeros(batch, 1, r, d), kv[:, :-1, :, :d]], dim=1)
            earlier_gate = torch.cat([gate.new_full((batch, 1, r, d), float("-inf")), gate[:, :-1, :, :d]], dim=1)
            kv = torch.cat([earlier_kv, kv[..., d:]], dim=2)
            gate = torch.cat([earlier_gate, gate[..., d:]], dim=2)
        pooled = self.kv_norm((kv * gate.softmax(dim=2, dtype=torch.float32).to(kv.dtype)).sum(dim=2))
        positions = torch.arange(windows, device=x.device) * r
        return rotary(pooled.unsqueeze(2), positions).squeeze(2)


class IndexerScorer(nn.Module):
    """The indexer's per-head weights of each query (weights_proj), as transformers' scorer holds them."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.weights_proj = nn.Linear(hidden, heads, bias=False)


class Indexer(Compressor):
    """The lightning indexer of a CSA layer (transformers' DeepseekV4Indexer): each query's best compressed entries.

    Its own overlapping compressor at indexer_head_dim; queries from the query latent
    (q_b_proj), turned at their positions; each entry scored by Σ_h w_h · ReLU(q_h · k)
    (weights_proj's per-head weights), the entries whose windows have not closed left out.
    """

    def __init__(self, config: ModuleConfig, ratio: int) -> None:
        super().__init__(config, int(config.indexer_head_dim), ratio, overlap=True)
        self.heads, self.topk = int(config.indexer_heads), int(config.indexer_topk)
        self.q_b_proj = nn.Linear(config.query_rank, self.heads * self.width, bias=False)
        self.scorer = IndexerScorer(config.hidden, self.heads)

    def select(self, x: Tensor, latent: Tensor, positions: Tensor, rotary: TailRotary) -> tuple[Tensor, Tensor]:
        """Return each query's chosen entries [b, s, k] (−1: none), k = min(indexer_topk, entries), and the scores."""
        batch, seq, _ = x.shape
        keys = self.pool(x, rotary)
        q = rotary(self.q_b_proj(latent).view(batch, seq, self.heads, self.width), positions)
        scores = torch.relu(torch.matmul(q.float(), keys.float().transpose(-1, -2).unsqueeze(1))) * self.width ** -0.5
        weights = self.scorer.weights_proj(x).float() * self.heads ** -0.5  # transformers' DeepseekV4IndexerScorer
        scores = (scores * weights.unsqueeze(-1)).sum(dim=2)  # [b, s, n]
        entries = keys.shape[1]
        chosen = min(self.topk, entries)
        if entries == 0:
            return scores.topk(chosen, dim=-1).indices, scores
        closed = ((positions + 1) // self.ratio).view(1, -1, 1)  # a query sees the windows before its position + 1
        future = torch.arange(entries, device=x.device).view(1, 1, -1) >= closed
        picked = scores.detach().masked_fill(future, float("-inf")).topk(chosen, dim=-1).indices
        return torch.where(picked >= closed, torch.full_like(picked, -1), picked), scores


class EntryCompressor(Compressor):
    """A compressed layer's `compressor` slot path: HCA's, or CSA's with its `indexer`."""

    def __init__(self, config: ModuleConfig) -> None:
        indexed = bool(config.compress_indexed)
        super().__init__(config, int(config.head_dim), int(config.compress_ratio), overlap=indexed)
        self.indexer = Indexer(config, self.ratio) if indexed else None

    def entries(self, x: Tensor, latent: Tensor, positions: Tensor,
                rotary: TailRotary) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor] | None]:
        """Return the entries [b, n, d], the scores' bias [b, s, n] over them (0 seen, −inf not) and, with an
        indexer, its scores and selection [b, s, n] (its KL objective's: `indexer_kl`).

        The indexer reads `x` and `latent` detached: the language model's loss reaches it only through its
        objective, as DeepSeek-V3.2's lightning indexer (hpdsl/torch/modules/indexer.py).
        """
        keys = self.pool(x, rotary)
        batch, seq, entries = x.shape[0], x.shape[1], keys.shape[1]
        if self.indexer is None:
            closed = ((positions + 1) // self.ratio).view(1, -1, 1)
            seen = torch.arange(entries, device=x.device).view(1, 1, -1) < closed
            bias = torch.zeros(batch, seq, entries, device=x.device, dtype=keys.dtype)
            return keys, bias.masked_fill(~seen, float("-inf")), None
        picked, scores = self.indexer.select(x.detach(), latent.detach(), positions, rotary)
        safe = torch.where(picked >= 0, picked, torch.full_like(picked, entries))
        bias = keys.new_full((batch, seq, entries + 1), float("-inf")).scatter(-1, safe, 0.0)[..., :entries]
        return keys, bias, (scores, bias == 0)


def indexer_kl(scores: Tensor, selected: Tensor, attention: Tensor) -> Tensor:
    """Return Σ over queries of KL(the attention's share of each selected entry ‖ the indexer's softmax over them).

    The lightning indexer's objective (DeepSeek-V3.2's, hpdsl/torch/modules/indexer.py): the main
    attention's probabilities over the selected entries [b, s, n] (summed over heads, detached),
    normalised; transformers' forward trains no indexer, so this is hpdsl's training rule, the forward
    unchanged (with_aux_loss).
    """
    target = attention.float().masked_fill(~selected, 0.0)
    target = target / target.sum(-1, keepdim=True).clamp_min(torch.finfo(target.dtype).tiny)
    log_q = scores.masked_fill(~selected, float("-inf")).log_softmax(-1)
    log_p = target.clamp_min(torch.finfo(target.dtype).tiny).log()
    picked = selected & selected.any(-1, keepdim=True)
    return torch.where(picked, target * (log_p - log_q), torch.zeros_like(target)).sum()


class GroupedLinear(nn.Module):
    """o_a_proj: each of `groups` input groups through its own block of `weight` [groups · out, in / groups]."""

    def __init__(self, width: int, out: int, groups: int) -> None:
        super().__init__()
        self.groups = groups
        self.weight = nn.Parameter(torch.empty(groups * out, width))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the blocks as nn.Linear initialises its weight (a meta build's materialize calls this)."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x: Tensor) -> Tensor:
        """Return [..., groups, out] of `x` [..., groups, width]."""
        blocks = self.weight.view(self.groups, -1, self.weight.shape[-1])
        return torch.einsum("...gi,goi->...go", x, blocks)


class CompressedAttention(nn.Module):
    """DeepSeek-V4's attention (the `local` variant): see the module docstring."""

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, context: ContextLike = None,
                 module_fqn: str = "") -> None:
        super().__init__()
        heads, d, rank = int(config.heads), int(config.head_dim), int(config.query_rank or 0)
        groups, o_rank = int(config.o_groups or 0), int(config.o_lora_rank or 0)
        if config.kv_heads != 1 or not rank or not groups or not o_rank or (heads * d) % groups:
            raise BuildError(f"DeepSeek-V4's attention needs one key-and-value head (kv_heads {config.kv_heads}), "
                             f"query_rank ({rank}), o_groups ({groups}) dividing heads × head_dim ({heads * d}) "
                             f"and o_lora_rank ({o_rank})")
        self.config, self.layer_index, self.heads, self.head_dim = config, layer_index, heads, d
        self.eps, self.window = float(config.norm_eps), int(config.window or config.sliding_window or 0)
        self.q_a_proj = nn.Linear(config.hidden, rank, bias=False)
        self.q_a_norm = RMSNorm(rank, config.norm_eps)
        self.q_b_proj = nn.Linear(rank, heads * d, bias=False)
        self.kv_proj = nn.Linear(config.hidden, d, bias=False)
        self.kv_norm = RMSNorm(d, config.norm_eps)
        self.o_a_proj = GroupedLinear(heads * d // groups, o_rank, groups)
        self.o_b_proj = nn.Linear(groups * o_rank, config.hidden, bias=False)
        self.sinks = nn.Parameter(torch.zeros(heads))
        compressed = int(config.compress_ratio or 0) > 0
        self.compressor = EntryCompressor(config) if compressed else None
        rope_dim = int(config.rope_head_dim or d)
        main = evolve(config, rope_type="default")  # the sliding layers' rope: plain, at rope_theta
        self.rotary = TailRotary(compressed_config(config) if compressed else main, rope_dim)
        self.compressed_rotary = TailRotary(compressed_config(config), rope_dim)

    def reset_parameters(self) -> None:
        """Zero the sink logits (transformers' initial value)."""
        with torch.no_grad():
            self.sinks.zero_()

    def forward(self, x: Tensor, *, positions: Tensor | None = None, bias: Tensor | None = None,
                memory: Tensor | None = None) -> Tensor:
        """Attend from `x` [b, s, h] over the window's keys and the compressed entries; return [b, s, h]."""
        batch, seq, _ = x.shape
        positions = torch.arange(seq, device=x.device) if positions is None else positions
        latent = self.q_a_norm(self.q_a_proj(x))
        q = unweighted_rms(self.q_b_proj(latent).view(batch, seq, self.heads, self.head_dim), self.eps)
        q = self.rotary(q, positions)
        kv = self.rotary(self.kv_norm(self.kv_proj(x)).view(batch, seq, 1, self.head_dim), positions)[:, :, 0]
        gap = positions[:, None] - positions[None, :]
        seen = (gap >= 0) & ((gap < self.window) if self.window else True)
        scores_bias = torch.zeros(seq, seq, device=x.device, dtype=q.dtype).masked_fill(~seen, float("-inf"))
        scores_bias = scores_bias.expand(batch, seq, seq)
        indexed = None
        if self.compressor is not None:
            entries, entry_bias, indexed = self.compressor.entries(x, latent, positions, self.compressed_rotary)
            kv = torch.cat([kv, entries.to(kv.dtype)], dim=1)
            scores_bias = torch.cat([scores_bias, entry_bias.to(q.dtype)], dim=-1)
        scores = torch.einsum("bshd,btd->bhst", q, kv) * self.head_dim ** -0.5 + scores_bias.unsqueeze(1)
        sinks = self.sinks.to(scores.dtype).view(1, -1, 1, 1).expand(batch, -1, seq, 1)
        logits = torch.cat([scores, sinks], dim=-1)
        probs = (logits - logits.max(dim=-1, keepdim=True).values).softmax(dim=-1)[..., :-1]
        out = self.rotary(torch.einsum("bhst,btd->bshd", probs.to(kv.dtype), kv), positions, back=True)
        grouped = self.o_a_proj(out.reshape(batch, seq, self.o_a_proj.groups, -1))
        out = self.o_b_proj(grouped.flatten(2))
        if indexed is None or not torch.is_grad_enabled():
            return out
        return with_aux_loss(out, indexer_kl(*indexed, probs[..., seq:].detach().sum(dim=1)))


__all__ = ["CompressedAttention", "Compressor", "EntryCompressor", "GroupedLinear", "Indexer", "TailRotary",
           "unweighted_rms"]
