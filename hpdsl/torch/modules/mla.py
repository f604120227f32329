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

With index_n_heads > 0 the layer is DeepSeek Sparse Attention (DeepSeek-V3.2,
GLM-5): a lightning indexer (hpdsl/torch/modules/indexer.py), replicated on
every tp rank, picks each query's index_topk keys among those it may see, and
the attention runs over those alone. The indexer learns from its KL objective,
whose target, the attention's distribution summed over heads, is summed over
tp (each rank holds some of the heads) so every rank's replica steps alike.

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
from hpdsl.torch.modules.collectives import gather_along, gather_sequence, sum_gradients
from hpdsl.torch.modules.common import RMSNorm, attend, causal_mask, core_attention, cp_mesh, job_of, refuse_axis
from hpdsl.torch.modules.rope import Rotary, deinterleaved, yarn_scale
from hpdsl.torch.modules.indexer import Indexer, with_aux_loss

LATENT_NORM_EPS = 1e-6
"""The query and key/value latent norms' epsilon: RMSNorm's default, as transformers builds them."""


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
            # The latent norms keep RMSNorm's own epsilon, 1e-6, whatever the config's (transformers'
            # DeepseekV3Attention builds them without its rms_norm_eps).
            self.q_a_layernorm = RMSNorm(rank, LATENT_NORM_EPS)
            self.q_b_proj = nn.Linear(rank, a * config.q_head_dim, bias=False)
        else:
            self.q_proj = nn.Linear(h, a * config.q_head_dim, bias=False)
        latent = config.kv_lora_rank
        self.kv_a_proj_with_mqa = nn.Linear(h, latent + config.rope_dim, bias=config.qkv_bias)
        self.kv_a_layernorm = RMSNorm(latent, LATENT_NORM_EPS)
        self.kv_b_proj = nn.Linear(latent, config.kv_heads * (self.nope + config.head_dim), bias=False)
        self.o_proj = nn.Linear(a * config.head_dim, h, bias=config.o_bias)
        self.indexer = Indexer(config) if config.index_n_heads else None
        self.rotary = Rotary(config, config.rope_dim)
        # DeepSeek's YaRN: the softmax scale times mscale² at mscale_all_dim, as transformers' yarn_apply_mscale.
        self.scale = config.q_head_dim ** -0.5
        if config.rope_type != "default" and config.rope_mscale_all_dim:
            self.scale *= yarn_scale(config.rope_factor, config.rope_mscale_all_dim) ** 2
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
        latent = self.q_a_layernorm(self.q_a_proj(x)) if c.q_lora_rank else None
        q = self.q_b_proj(latent) if latent is not None else self.q_proj(x)
        # -1 heads: under tp this rank's up-projections hold heads / tp and kv_heads / tp of them.
        q_nope, q_rope = q.view(batch, seq, -1, c.q_head_dim).split([self.nope, c.rope_dim], dim=-1)
        kv_latent, k_rope = self.kv_a_proj_with_mqa(x).split([c.kv_lora_rank, c.rope_dim], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(kv_latent)).view(batch, seq, -1, self.nope + c.head_dim)
        k_nope, v = kv.split([self.nope, c.head_dim], dim=-1)
        # Its own storage: attention saves v for the backward, and a view of kv would keep k_nope alive beside
        # it (s·heads·nope elements a layer the estimator does not price: docs/validation.md, "MTP layers").
        v = v.contiguous()
        if self.tp is not None:  # every head shares the rotary key; this rank's heads give part of its gradient
            k_rope = sum_gradients(k_rope, self.tp.group)
        k_rope = k_rope.view(batch, seq, 1, c.rope_dim).expand(-1, -1, kv.shape[2], -1)
        if c.rope_dim:
            if c.rope_interleave:  # stored as (x0, y0, x1, y1, ...): regrouped to (x..., y...) first, as transformers
                q_rope, k_rope = deinterleaved(q_rope), deinterleaved(k_rope)
            q_rope, k_rope = self.rotary(q_rope, positions), self.rotary(k_rope, positions)
        q = torch.cat([q_nope, q_rope], dim=-1)
        k = torch.cat([k_nope, k_rope], dim=-1)
        k, v, k_positions = self.gather_sequence(k, v, positions)
        scale = self.scale
        if self.indexer is not None and latent is not None:
            out = self.sparse_attention(x, latent, (q, k, v), positions, k_positions, scale)
        elif k_positions is positions or not c.causal:
            out = core_attention(self.recompute_core, attend, q, k, v, None, backend=self.backend, scale=scale,
                                 causal=c.causal)
        else:
            out = core_attention(self.recompute_core, attend, q, k, v, causal_mask(positions, k_positions),
                                 backend=self.backend, scale=scale)
        return self.o_proj(out.reshape(batch, seq, -1))

    def sparse_attention(self, x: Tensor, latent: Tensor, qkv: tuple[Tensor, Tensor, Tensor], positions: Tensor,
                         k_positions: Tensor, scale: float) -> Tensor:
        """Return attention over each query's index_topk keys, as the indexer selects them (DSA).

        The indexer reads the layer's input and query latent detached (its
        paper's sparse stage); while training, its KL objective's gradient
        rides on the output (with_aux_loss).
        """
        indexer, (q, k, v) = self.indexer, qkv
        assert indexer is not None
        visible = (causal_mask(positions, k_positions) if self.config.causal else
                   torch.ones(len(positions), len(k_positions), dtype=torch.bool, device=x.device))
        x, latent = x.detach(), latent.detach()
        scores = indexer.scores(x, latent, self.gather_index_keys(indexer.keys(x, positions)), positions)
        selected = indexer.select(scores, visible)
        out = core_attention(self.recompute_core, attend, q, k, v, selected[:, None], backend=self.backend,
                             scale=scale)
        if not torch.is_grad_enabled():
            return out
        return with_aux_loss(out, indexer.kl_loss(scores, selected, self.attention_target(q, k, selected, scale)))

    @torch.no_grad()
    def attention_target(self, q: Tensor, k: Tensor, selected: Tensor, scale: float) -> Tensor:
        """Return the attention's distribution over the selected keys [b, s, t], summed over every head and normalised."""
        groups = q.shape[2] // k.shape[2]
        keys = k.repeat_interleave(groups, dim=2) if groups > 1 else k
        logits = torch.einsum("bshd,bthd->bhst", q.float(), keys.float()) * scale
        summed = logits.masked_fill(~selected[:, None], float("-inf")).softmax(-1).sum(1)
        if self.tp is not None:  # this rank's heads only: the whole sum is over tp
            torch.distributed.all_reduce(summed, group=self.tp.group)
        return summed / self.config.heads

    def gather_sequence(self, k: Tensor, v: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Return the keys, values and key positions every query of this rank sees."""
        return k, v, positions

    def gather_index_keys(self, keys: Tensor) -> Tensor:
        """Return the indexer's keys [b, t, d] of every position this rank's queries see."""
        return keys


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

    def gather_index_keys(self, keys: Tensor) -> Tensor:
        """Return the indexer's keys of the whole sequence, gathered over cp."""
        group = self.job.group("cp") if self.cp > 1 and self.job is not None else None
        return keys if group is None else gather_along(keys, group, 1)


__all__ = ["MLAttention", "RingMLAttention"]
