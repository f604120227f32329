"""Reference multi-head latent attention (MLA), with the parameter shapes of Transformers' DeepseekV3Attention.

Queries go through a low-rank latent (q_a_proj, its RMSNorm, q_b_proj) unless
q_lora_rank is 0 (one q_proj); keys and values share one compressed latent plus
a rotary key part shared by all heads (kv_a_proj_with_mqa, its RMSNorm,
kv_b_proj). Each query/key head is a no-position part and a rotary part.
Under tensor parallelism (families/mla.hpf's layout) each rank holds whole
heads of the up-projections and o_proj: the module reads the head counts from
their outputs and sums the shared rotary key's gradient over tp (each rank uses
it for its heads only). The latents need nothing: the column-parallel
up-projections already sum their input gradients over tp.

`RingMLAttention` is the cp > 1 variant: after the up-projections MLA is
ordinary attention whose query/key heads (nope + rope) are wider than its value
heads, so it does what `RingAttention` does: every cp rank holds one contiguous
chunk of the sequence and all-gathers the keys and values of the others over
the cp axis (their gradients summed back), each query masked to the positions
at or before its own. The score math takes the two head widths as they are.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.layout import TensorParallel
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.attention import BACKENDS
from hpdsl.torch.modules.collectives import gather_sequence, sum_gradients
from hpdsl.torch.modules.common import (RMSNorm, attend, causal_mask, core_attention, cp_mesh, job_of, refuse_axis,
                                        rotate)


def _deinterleaved(x: Tensor) -> Tensor:
    """Return x [..., d] with its interleaved pairs regrouped: evens, then odds (transformers' rope_interleave)."""
    return x.unflatten(-1, (-1, 2)).transpose(-1, -2).flatten(-2)


class MLAttention(nn.Module):
    """Multi-head latent attention over the whole local sequence."""

    context_parallel = False
    """Whether this variant gathers the keys and values of a sequence split over cp (RingMLAttention)."""
    recompute_core = False
    """Selective recompute (hpdsl.torch.parallelize sets it): the core attention reruns in the backward."""

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, backend: str = "sdpa",
                 context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__()
        if not self.context_parallel:
            refuse_axis(job_of(context, module_fqn), "cp", "MLAttention", module_fqn)
        if config.kv_lora_rank < 1:
            raise ValueError("multi-head latent attention needs a positive kv_lora_rank")
        if config.qk_norm:
            raise ValueError("multi-head latent attention normalises its latents; it has no per-head QK norm")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, found {backend!r}")
        if config.kv_heads < 1 or config.heads % config.kv_heads:
            raise ValueError(f"{config.heads} query heads cannot be grouped over {config.kv_heads} kv heads")
        self.config, self.layer_index, self.backend = config, layer_index, backend
        h, a, rank = config.hidden, config.heads, config.q_lora_rank
        self.nope = config.nope_dim or config.head_dim
        if rank:
            # DeepSeek's and GLM-4.7-Flash's attention_bias biases the two latent down-projections
            # and o_proj (transformers' DeepseekV3Attention): qkv_bias and o_bias (families/mla.hpf).
            self.q_a_proj = nn.Linear(h, rank, bias=config.qkv_bias)
            self.q_a_layernorm = RMSNorm(rank, config.norm_eps)
            self.q_b_proj = nn.Linear(rank, a * config.q_head_dim, bias=False)
        else:
            self.q_proj = nn.Linear(h, a * config.q_head_dim, bias=False)
        latent = config.kv_lora_rank
        self.kv_a_proj_with_mqa = nn.Linear(h, latent + config.rope_dim, bias=config.qkv_bias)
        self.kv_a_layernorm = RMSNorm(latent, config.norm_eps)
        self.kv_b_proj = nn.Linear(latent, config.kv_heads * (self.nope + config.head_dim), bias=False)
        self.o_proj = nn.Linear(a * config.head_dim, h, bias=config.o_bias)
        self.tp: TensorParallel | None = None

    def tensor_parallel_applied(self, tp: TensorParallel) -> None:
        """Note that the up-projections and o_proj were split by heads over tp (hpdsl.torch.layout calls this)."""
        self.tp = tp

    def forward(self, x: Tensor, *, positions: Tensor | None = None, bias: Tensor | None = None,
                memory: Tensor | None = None) -> Tensor:
        """Attend causally within `x` [b, s, h]; return [b, s, h]."""
        c = self.config
        batch, seq, _ = x.shape
        if positions is None:
            positions = torch.arange(seq, device=x.device)
        if c.q_lora_rank:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        else:
            q = self.q_proj(x)
        # -1 heads: under tp this rank's up-projections hold heads / tp and kv_heads / tp of them.
        q_nope, q_rope = q.view(batch, seq, -1, c.q_head_dim).split([self.nope, c.rope_dim], dim=-1)
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([c.kv_lora_rank, c.rope_dim], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(batch, seq, -1, self.nope + c.head_dim)
        k_nope, v = kv.split([self.nope, c.head_dim], dim=-1)
        # Its own storage: attention saves v for the backward, and a view of kv would keep k_nope alive beside
        # it (s·heads·nope elements a layer the estimator does not price: docs/validation.md, "MTP layers").
        v = v.contiguous()
        if self.tp is not None:  # every head shares the rotary key; this rank's heads give part of its gradient
            k_rope = sum_gradients(k_rope, self.tp.group)
        k_rope = k_rope.view(batch, seq, 1, c.rope_dim).expand(-1, -1, kv.shape[2], -1)
        if c.rope_dim:
            if c.rope_interleave:  # stored as (x0, y0, x1, y1, ...): regrouped to (x..., y...) first, as transformers
                q_rope, k_rope = _deinterleaved(q_rope), _deinterleaved(k_rope)
            q_rope = rotate(q_rope, positions, c.rope_theta)
            k_rope = rotate(k_rope, positions, c.rope_theta)
        q = torch.cat([q_nope, q_rope], dim=-1)
        k = torch.cat([k_nope, k_rope], dim=-1)
        k, v, k_positions = self.gather_sequence(k, v, positions)
        scale = c.q_head_dim ** -0.5
        if k_positions is positions or not c.causal:
            out = core_attention(self.recompute_core, attend, q, k, v, None, backend=self.backend, scale=scale,
                                 causal=c.causal)
        else:
            out = core_attention(self.recompute_core, attend, q, k, v, causal_mask(positions, k_positions),
                                 backend=self.backend, scale=scale)
        return self.o_proj(out.reshape(batch, seq, -1))

    def gather_sequence(self, k: Tensor, v: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Return the keys, values and key positions every query of this rank sees."""
        return k, v, positions


class RingMLAttention(MLAttention):
    """Context-parallel MLA (the `ring` variant): keys and values all-gathered over the cp axis."""

    context_parallel = True

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, backend: str = "sdpa",
                 context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__(config, layer_index=layer_index, backend=backend, context=context, module_fqn=module_fqn)
        self.cp, self.job = cp_mesh(context, module_fqn, "RingMLAttention gathering keys and values")

    def gather_sequence(self, k: Tensor, v: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Return the keys, values and positions of the whole sequence, gathered over cp."""
        return gather_sequence(self.job.group("cp") if self.cp > 1 and self.job is not None else None,
                               k, v, positions)


__all__ = ["MLAttention", "RingMLAttention"]
