"""What a context-parallel delta rule keeps of what the previous cp rank hands it, per sequence.

Under cp each rank holds one contiguous chunk of the sequence, and two things
cross the chunk boundary into a Gated DeltaNet layer (hpdsl/torch/modules/
deltanet.py, docs/validation.md "Context parallelism for MLA and Gated
DeltaNet"): the causal convolution's left context, the previous rank's last
conv − 1 projected q, k, v inputs, and the delta rule's initial state, the
previous rank's final [value heads, d_k, d_v] state. The backward reads both
(the convolution's weight gradient reads the tail, the delta rule's gradient
the initial state), so a rank keeps them once per sequence, whatever its
chunk's length; the first rank keeps the zeros it starts from. The state is
fp32, as the chunked kernels carry it. Both are head-split, so tp divides them
like the mixer's other terms.
"""

from __future__ import annotations

from hpdsl.bound.bind import LayerConfig
from hpdsl.cost.formulas import xp
from hpdsl.cost.formulas.context import Ctx
from hpdsl.cost.formulas.xp import Val
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count

STATE_BYTES = 4
"""The delta rule's recurrent state is fp32."""


def carried(cfg: LayerConfig) -> tuple[float, float]:
    """Return (elements at compute bytes, bytes) a layer keeps per sequence of what the previous cp rank hands on."""
    rules = op_count(cfg.ops, OP.LINREC)
    if not rules or cfg.attn_kind != "linear":
        return 0.0, 0.0
    conv_dim = 2 * cfg.key_heads * cfg.key_head_dim + cfg.value_heads * cfg.value_head_dim
    state = cfg.value_heads * cfg.key_head_dim * cfg.value_head_dim
    return float(rules * (cfg.conv - 1) * conv_dim), float(rules * STATE_BYTES * state)


def carried_per_token(elements: float, state_bytes: float, whole: bool, x: Ctx) -> Val:
    """Return the per-sequence hand-off as bytes per token of the rank's chunk (s·b/cp tokens), 0 without cp."""
    per_sequence = (x.compute_bytes * elements + state_bytes) * x.cp / x.seq_len
    return xp.where(x.cp > 1, per_sequence if whole else per_sequence / x.tp, 0.0)


__all__ = ["STATE_BYTES", "carried", "carried_per_token"]
