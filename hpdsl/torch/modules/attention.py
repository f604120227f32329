"""Reference attention for the `attention` family: grouped-query attention and its context-parallel form.

`Attention` projects queries, keys and values (grouped-query: fewer key/value
heads than query heads), optionally normalises queries and keys per head
(QK-norm), rotates each head's first rotary_fraction of dims (all, unless
partial rotary), optionally takes the values from the key projection (k_eq_v) and
RMS-normalises them without a scale (v_norm, Gemma 4), or, kv_shared, attends to the keys and values an
earlier layer kept (Gemma 4's last num_kv_shared_layers: hpdsl/torch/model.py links it), and gates the output (the query projection is twice as wide and its
second half, through a sigmoid, scales the attention output), then runs SDPA
or the eager reference (soft-capped scores, Gemma 2's attn_softcap, run it: SDPA
cannot cap them; attn_scale_dim replaces head_dim in the 1/√d score scale);
ALiBi (alibi) adds slope · (key − query position) to each head's scores, as
transformers' BloomAttention does (its slopes, its score scale 1/√head_dim);
a sliding-window layer's eager reference computes only
its band of w keys per query (common.banded_attention). Llama 4's rotary layers attend within chunks of
attention_chunk positions, regroup their interleaved rotary pairs (rope_interleave) and normalise each q and k
head without a scale (qk_norm_unscaled); its no-position layers scale their queries by a temperature past
nope_temperature_floor positions. Laguna's softplus gate (softplus_gate) scales each head's output by
softplus of g_proj's value for it. Under tensor parallelism (families/attention.hpf's
layout) each rank holds whole heads: the module reads the head count from its
projections' outputs, takes its heads' share of a position bias, and sums its
replicated QK norms' gradients over tp. `RingAttention` is the cp > 1 variant: every cp rank
holds one contiguous chunk of the sequence, computes its own keys and values,
and all-gathers them over the cp axis, so each query sees the whole prefix.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.layout import TensorParallel
from hpdsl.torch.mesh import ContextLike
from hpdsl.torch.modules.collectives import gather_sequence, sum_gradients
from hpdsl.torch.modules.common import (alibi_slopes, attend, banded_attention, causal_mask, core_attention, cp_mesh,
                                        make_norm)
from hpdsl.torch.modules.rope import Rotary, deinterleaved, nope_temperature, query_scale

BACKENDS = ("sdpa", "eager")


class Attention(nn.Module):
    """Grouped-query attention over the whole local sequence (the `local` variant)."""

    recompute_core = False
    """Selective recompute (hpdsl.torch.parallelize sets it): the core attention reruns in the backward."""

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, backend: str = "sdpa",
                 context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__()
        if config.kv_heads < 1 or config.heads % config.kv_heads:
            raise ValueError(f"{config.heads} query heads cannot be grouped over {config.kv_heads} kv heads")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, found {backend!r}")
        self.config, self.layer_index, self.backend = config, layer_index, backend
        h, d = config.hidden, config.head_dim
        gate = 2 if config.output_gate else 1
        self.q_proj = nn.Linear(h, gate * config.heads * d, bias=config.qkv_bias)
        # kv_shared (Gemma 4's last num_kv_shared_layers): no keys or values of its own; it attends to those
        # of the earlier layer hpdsl/torch/model.py links it to (`kv_source`), which keeps them (`keeps_kv`).
        own_kv = not config.kv_shared
        self.k_proj = nn.Linear(h, config.kv_heads * d, bias=config.qkv_bias) if own_kv else None
        # The value heads may be narrower than the query/key heads (MiMo-V2-Flash's value_dim).
        self.v_dim = config.value_width or config.value_dim or d
        # k_eq_v (Gemma 4's full-attention layers): the values are the key projection's output.
        self.v_proj = None if config.k_eq_v or not own_kv else \
            nn.Linear(h, config.kv_heads * self.v_dim, bias=config.qkv_bias)
        self.o_proj = nn.Linear(config.heads * self.v_dim, h, bias=config.o_bias)
        # qk_norm_full (OLMoE): one norm over the whole projection, not one per head.
        q_width = config.q_norm_width or (config.heads * d if config.qk_norm_full else d)
        k_width = config.k_norm_width or (config.kv_heads * d if config.qk_norm_full else d)
        # qk_norm_unscaled (Llama 4's L2Norm): each head RMS-normalised without a scale, no module (_unscaled).
        scaled = config.qk_norm and not config.qk_norm_unscaled
        self.q_norm = make_norm(config, q_width) if scaled else None
        self.k_norm = make_norm(config, k_width) if scaled and own_kv else None
        self.kv_source: list[Attention] = []  # a plain list: the source is another layer's module, not a child
        self.keeps_kv = False
        self.kept_kv: tuple[Tensor, Tensor, Tensor] | None = None  # held to the next forward (a recompute reads it)
        self.sinks = nn.Parameter(torch.empty(config.heads)) if config.attention_sinks else None
        # Laguna's softplus gate: per head, or per head dim (softplus_gate_wide), from the layer's input.
        self.gate_width = d if config.softplus_gate_wide else 1
        self.g_proj = nn.Linear(h, config.heads * self.gate_width, bias=False) if config.softplus_gate else None
        # Partial rotary (Phi): the first ⌊head_dim × rotary_fraction⌋ dims of each head turn, as transformers',
        # at the layer's rope_type; a sliding-window layer may have its own base (hpdsl/torch/modules/rope.py).
        self.rotary = Rotary(config, d, config.rotary_fraction, sliding=config.window > 0)
        # Gemma's query_pre_attn_scalar: scores scaled by 1/√attn_scale_dim, not 1/√head_dim.
        self.scale = config.attn_scale_dim ** -0.5 if config.attn_scale_dim else None
        self.softcap = float(config.attn_softcap)
        self.tp: TensorParallel | None = None
        self.reset_parameters()  # a model built on a real device has no uninitialised sink logits

    def reset_parameters(self) -> None:
        """Zero the sink logits (the projections and norms initialise themselves)."""
        if self.sinks is not None:
            with torch.no_grad():
                self.sinks.zero_()

    def tensor_parallel_applied(self, tp: TensorParallel) -> None:
        """Note that the projections were split by heads over tp (hpdsl.torch.layout calls this)."""
        if self.config.qk_norm and self.config.qk_norm_full and tp.size > 1:
            raise BuildError(f"a full-width QK-norm (qk_norm_full) normalises over every head; tp {tp.size} "
                             "splits the heads over ranks and this module has no all-reduce of the norm's "
                             "statistics: use tp = 1")
        self.tp = tp

    def forward(self, x: Tensor, *, positions: Tensor | None = None, bias: Tensor | None = None,
                memory: Tensor | None = None) -> Tensor:
        """Attend from `x` [b, s, h] to itself, or to `memory` (cross-attention); return [b, s, h]."""
        batch, seq, _ = x.shape
        if positions is None:
            positions = torch.arange(seq, device=x.device)
        # No-position layers (no_rope) and ALiBi turn no dims; ALiBi biases the scores instead.
        rotary = self.config.rope and not self.config.no_rope and not self.config.alibi and memory is None
        q, gate = self._queries(x, positions if rotary else None)
        if self.config.no_rope and self.config.nope_temperature:  # Llama 4's no-position layers
            q = (q * nope_temperature(self.config, positions)[None, :, None, None]).to(q.dtype)
        if self.config.kv_shared:
            k, v, k_positions = self._shared_kv()
        else:
            k, v = self._keys_values(x if memory is None else memory, positions if rotary else None)
            k_positions = positions
            if memory is None:
                k, v, k_positions = self.gather_sequence(k, v, positions)
            if self.keeps_kv:
                self.kept_kv = (k, v, k_positions)
        causal = self.config.causal and memory is None
        if self.config.alibi and memory is None:
            slopes = alibi_slopes(self.config.heads).to(device=x.device, dtype=q.dtype)
            linear = slopes[:, None, None] * (k_positions[None, None, :] - positions[None, :, None]).to(q.dtype)
            bias = linear[None] if bias is None else bias + linear[None]
        if bias is not None and self.tp is not None and bias.shape[1] != q.shape[2]:
            bias = bias.chunk(self.tp.size, dim=1)[self.tp.rank]  # this rank's heads
        sinks = self._sinks(q.shape[2])
        window = self.config.window if memory is None else 0
        window = window if window < k.shape[1] else 0  # a window past the keys is no window
        # Llama 4's rotary layers attend within chunks; keys that all lie in one chunk are no chunking.
        chunk = self.config.chunk if rotary and causal else 0  # the rule the estimate prices (LayerConfig.chunk)
        chunk = chunk if chunk < k.shape[1] else 0
        aligned = causal and bias is None and k_positions is positions and not chunk
        modifiers = {"sinks": sinks, "scale": self.scale, "softcap": self.softcap}
        if aligned and not window:  # no mask tensor
            out = core_attention(self.recompute_core, attend, q, k, v, None, backend=self.backend, causal=True,
                                 **modifiers)
        elif aligned and (self.backend == "eager" or sinks is not None or self.softcap):  # eager: only the band
            out = core_attention(self.recompute_core, banded_attention, q, k, v, window, **modifiers)
        else:
            mask = self._mask(positions, k_positions, bias, causal=causal, window=window, chunk=chunk)
            out = core_attention(self.recompute_core, attend, q, k, v, mask, backend=self.backend, **modifiers)
        if gate is not None:
            out = out * torch.sigmoid(gate)
        if self.g_proj is not None:  # fp32 softplus, as transformers' LagunaAttention
            gates = torch.nn.functional.softplus(self.g_proj(x).float()).to(out.dtype)
            out = out * gates.view(batch, seq, -1, self.gate_width)
        return self.o_proj(out.reshape(batch, seq, -1))

    def _shared_kv(self) -> tuple[Tensor, Tensor, Tensor]:
        """Return the keys, values and key positions of the layer this kv_shared layer reuses."""
        source = self.kv_source[0] if self.kv_source else None
        if source is None or source.kept_kv is None:
            raise BuildError(f"layer {self.layer_index}: a kv_shared attention reuses an earlier layer's keys and "
                             "values, but none was linked or ran first; build it with build_model, which links it")
        return source.kept_kv

    def _sinks(self, heads: int) -> Tensor | None:
        """Return this rank's heads' sink logits (under tp the rank holds heads / tp of them)."""
        if self.sinks is None or self.tp is None or self.sinks.shape[0] == heads:
            return self.sinks
        return self.sinks.chunk(self.tp.size)[self.tp.rank]

    def gather_sequence(self, k: Tensor, v: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Return the keys, values and key positions every query of this rank sees."""
        return k, v, positions

    def _queries(self, x: Tensor, positions: Tensor | None) -> tuple[Tensor, Tensor | None]:
        batch, seq, _ = x.shape
        d = self.config.head_dim
        # -1 heads: under tp this rank's q_proj holds heads / tp of them, whole.
        q = self.q_proj(x).view(batch, seq, -1, (2 if self.config.output_gate else 1) * d)
        gate = None
        if self.config.output_gate:
            # Per head: the query, then its gate (the Qwen3-Next layout).
            q, gate = q.split(d, dim=-1)
            gate = gate.reshape(batch, seq, -1, d)
            # Its own storage: what the backward keeps of q (QK-norm's input) must not pin the gate's.
            q = q.contiguous()
        if self.q_norm is not None:
            q = self._norm(self.q_norm, q.flatten(2)).view_as(q) if self.config.qk_norm_full \
                else self._norm(self.q_norm, q)
        q = self._unscaled(q)
        if positions is not None:
            q = self.rotary(deinterleaved(q) if self.config.rope_interleave else q, positions)
            if self.config.rope_query_beta:
                q = q * query_scale(self.config, positions).to(q.dtype)[None, :, None, None]
        return q, gate

    def _keys_values(self, x: Tensor, positions: Tensor | None) -> tuple[Tensor, Tensor]:
        batch, seq, _ = x.shape
        assert self.k_proj is not None  # a kv_shared layer computes none (forward)
        k = self.k_proj(x).view(batch, seq, -1, self.config.head_dim)
        v = k if self.v_proj is None else self.v_proj(x).view(batch, seq, -1, self.v_dim)
        if self.config.v_norm:  # Gemma 4: each value head RMS-normalised, no scale (fp32, as transformers)
            v = (v.float() * torch.pow(v.float().pow(2).mean(-1, keepdim=True) + self.config.norm_eps, -0.5)).type_as(v)
        if self.k_norm is not None:
            k = self._norm(self.k_norm, k.flatten(2)).view_as(k) if self.config.qk_norm_full \
                else self._norm(self.k_norm, k)
        k = self._unscaled(k)
        if positions is not None:
            k = self.rotary(deinterleaved(k) if self.config.rope_interleave else k, positions)
        return k, v

    def _unscaled(self, x: Tensor) -> Tensor:
        """Return x's heads RMS-normalised without a scale where qk_norm_unscaled says (fp32, as transformers)."""
        if not (self.config.qk_norm and self.config.qk_norm_unscaled):
            return x
        wide = x.float()
        return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.config.norm_eps)).type_as(x)

    def _norm(self, norm: nn.Module, x: Tensor) -> Tensor:
        """Apply a per-head norm; under tp it sees only this rank's heads, so its gradients sum over tp."""
        if self.tp is None:
            return norm(x)
        params = {name: sum_gradients(p, self.tp.group) for name, p in norm.named_parameters()}
        return torch.func.functional_call(norm, params, (x,))

    @staticmethod
    def _mask(q_positions: Tensor, k_positions: Tensor, bias: Tensor | None, *, causal: bool,
              window: int = 0, chunk: int = 0) -> Tensor | None:
        allowed = causal_mask(q_positions, k_positions) if causal else None
        if allowed is not None and window:  # a sliding window: the latest `window` positions only
            allowed = allowed & (q_positions[:, None] - k_positions[None, :] < window)
        if allowed is not None and chunk:  # chunked attention: the keys of the query's own chunk only
            allowed = allowed & (q_positions[:, None] // chunk == k_positions[None, :] // chunk)
        if bias is None:
            return allowed
        if allowed is None:
            return bias
        return bias.masked_fill(~allowed, float("-inf"))


class RingAttention(Attention):
    """Context-parallel attention (the `ring` variant): keys and values all-gathered over the cp axis."""

    def __init__(self, config: ModuleConfig, *, layer_index: int = 0, backend: str = "sdpa",
                 context: ContextLike = None, module_fqn: str = "") -> None:
        super().__init__(config, layer_index=layer_index, backend=backend, context=context,
                         module_fqn=module_fqn)
        self.cp, self.job = cp_mesh(context, module_fqn, "RingAttention gathering keys and values")

    def gather_sequence(self, k: Tensor, v: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Return the keys, values and positions of the whole sequence, gathered over cp."""
        return gather_sequence(self.job.group("cp") if self.cp > 1 and self.job is not None else None,
                               k, v, positions)


__all__ = ["Attention", "BACKENDS", "RingAttention"]
