"""The bound cost IR into exact parameter counts: per layer, per kind, per group, per model.

The counts are exact against the HuggingFace `transformers` implementation of the
same config (tests/cost/test_params_hf.py builds each on the meta device). They
follow docs/reference.md#parameter-formulas, scaled by the kind's op counts
(attMM/4 attentions, ffMM matrices per MLP, normOp norms), with three corrections
documented in docs/cost-model.md: an unstated bias is no bias (not upstream's width-h legacy
bias), the output head has a bias only under head_bias (Phi), and a shared expert is priced at its own width.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import attrs

from hpdsl.bound.bind import CostModel, LayerConfig
from hpdsl.model import ops as OP
from hpdsl.model.ops import count as op_count

Number = int | float


@attrs.frozen
class LayerParams:
    """The parameters of one layer, split the way sharding treats them."""

    attention: Number
    norms: Number
    dense_ffn: Number
    router: Number
    routed: Number
    shared: Number
    per_expert: Number
    experts: int
    top_k: int

    @property
    def non_expert(self) -> Number:
        """Return what every rank of the expert-parallel group holds whole."""
        return self.attention + self.norms + self.dense_ffn + self.router

    @property
    def total(self) -> Number:
        """Return all the layer's parameters."""
        return self.non_expert + self.routed + self.shared

    @property
    def active(self) -> Number:
        """Return the parameters one token runs through (top-k of the routed experts)."""
        return self.total - (self.experts - self.top_k) * self.per_expert if self.routed else self.total


@attrs.frozen
class GroupParams:
    """One layer group's parameters: per layer and in all."""

    kind: str | None
    count: int
    mtp: bool
    per_layer: Number
    total: Number
    active: Number


@attrs.frozen
class ParamReport:
    """A model's parameter counts; `total` and `active` exclude MTP layers."""

    total: Number
    active: Number
    embedding: Number
    output: Number
    final_norms: Number
    positions: Number
    body: Number
    mtp: Number
    per_kind: dict[str, LayerParams]
    groups: tuple[GroupParams, ...]

    def to_json(self) -> dict[str, Any]:
        """Return the report as `hpdsl estimate --json` prints it under "params"."""
        return {
            "total": self.total, "active": self.active, "embedding": self.embedding,
            "output": self.output, "final_norms": self.final_norms, "positions": self.positions,
            "body": self.body, "mtp": self.mtp,
            "per_kind": {name: _layer_json(p) for name, p in self.per_kind.items()},
            "groups": [attrs.asdict(g) for g in self.groups],
        }


def parameters(cost_model: CostModel) -> ParamReport:
    """Count a bound model's parameters exactly: embeddings, body, final norms, head, MTP."""
    model, base = cost_model.model, cost_model.base
    h = model.hidden
    per_kind = {name: layer_params(cost_model.kind_config(name)) for name in cost_model.kinds}
    groups = []
    for group in model.groups:
        layer = per_kind.get(group.kind) or layer_params(cost_model.kind_config(None))
        per_layer = layer.total + (mtp_extra(base) if group.mtp else 0)
        groups.append(GroupParams(group.kind, group.count, group.mtp, _exact(per_layer),
                                  _exact(per_layer * group.count), _exact(layer.active * group.count)))
    towers = 2 if {"encoder", "decoder"} <= {g.kind for g in model.groups} else 1
    embedding = model.vocab * h
    output = 0 if model.tie_embeddings else model.vocab * (h + int(bool(model.head_bias)))
    final_norms = towers * h * _norm_factor(base)
    positions = towers * (model.position_buckets or 0) * model.heads
    if model.learned_positions:
        positions += (model.max_positions or 0) * h
    body = sum(g.total for g in groups if not g.mtp)
    static = embedding + output + final_norms + positions
    return ParamReport(
        total=_exact(static + body),
        active=_exact(static + sum(g.active for g in groups if not g.mtp)),
        embedding=embedding, output=output, final_norms=final_norms, positions=positions,
        body=_exact(body), mtp=_exact(sum(g.total for g in groups if g.mtp)),
        per_kind=per_kind, groups=tuple(groups))


def layer_params(cfg: LayerConfig) -> LayerParams:
    """Return the exact parameters of one layer priced with `cfg`."""
    attention = Fraction(op_count(cfg.ops, OP.ATT_MM), 4) * _projections(cfg) + cfg.attn_extra_params
    n_ff = op_count(cfg.ops, OP.FF_MM)
    if cfg.experts > 1:
        per_expert = _mlp(n_ff, cfg.hidden, cfg.ffn_width, cfg.mlp_bias)
        router = cfg.hidden * cfg.experts + (cfg.experts if cfg.router_bias else 0)
        shared = cfg.shared_experts * _mlp(n_ff, cfg.hidden, cfg.shared_width, cfg.mlp_bias)
        shared += cfg.hidden if cfg.shared_experts and cfg.shared_gate else 0
        return LayerParams(_exact(attention), _norms(cfg), 0, router, cfg.experts * per_expert,
                           shared, per_expert, cfg.experts, cfg.top_k)
    dense = _mlp(n_ff, cfg.hidden, cfg.ffn_width, cfg.mlp_bias)
    return LayerParams(_exact(attention), _norms(cfg), dense, 0, 0, 0, 0, 1, 1)


def mtp_extra(cfg: LayerConfig) -> int:
    """Return what an MTP layer adds to its decoder layer: two input norms, the 2h→h projection, a head norm."""
    return 2 * cfg.hidden * cfg.hidden + 3 * cfg.hidden * _norm_factor(cfg)


def _projections(cfg: LayerConfig) -> Fraction:
    """Return one attention's projection weights and biases (q, k, v, o or MLA's latents)."""
    h, a, d_h = cfg.hidden, cfg.heads, cfg.head_dim
    if cfg.attn_kind == "ssm":
        return Fraction(0)  # the whole mixer is attn_extra_params, summed from its family's layout
    if cfg.attn_kind == "mla":
        d_qk = cfg.nope_dim or d_h
        heads_q = a * (d_qk + cfg.rope_dim)
        dcq, dckv = cfg.q_lora_rank, cfg.kv_lora_rank
        query = h * dcq + dcq + dcq * heads_q if dcq else h * heads_q
        kv = h * (dckv + cfg.rope_dim) + dckv + dckv * cfg.kv_heads * (d_qk + d_h)
        out = a * d_h * h + (h if cfg.o_bias else 0)
        return Fraction(query + kv + out)
    biased = cfg.qkv_bias and cfg.attn_kind != "linear"
    gate = 2 if cfg.output_gate else 1
    d_q = a * d_h
    d_kv = Fraction(cfg.kv_heads) * d_h
    q = gate * h * d_q + (gate * d_q if biased else 0)
    kv = 2 * (h * d_kv + (d_kv if biased else 0))
    out = d_q * h + (h if cfg.o_bias and cfg.attn_kind != "linear" else 0)
    sinks = a if cfg.attention_sinks and cfg.attn_kind != "linear" else 0
    return Fraction(q) + kv + out + sinks


def _mlp(n_ff: int, h: int, width: int, bias: bool) -> int:
    """Return one MLP of `n_ff` matrices between h and `width` (biases: width each, h on the last)."""
    return n_ff * h * width + ((n_ff - 1) * width + h if bias and n_ff else 0)


def _norm_factor(cfg: LayerConfig) -> int:
    return 2 if cfg.norm_bias else 1


def _norms(cfg: LayerConfig) -> int:
    count = cfg.layer_norms if cfg.layer_norms is not None else op_count(cfg.ops, OP.NORM)
    qk_norm = cfg.qk_norm and op_count(cfg.ops, OP.ATT_MM) > 0  # a feed-forward-only layer has no q, k
    return (count * cfg.hidden + int(qk_norm) * qk_norm_width(cfg)) * _norm_factor(cfg)


def qk_norm_width(cfg: LayerConfig) -> int:
    """Return the elements the q and k norms scale: a head each, or the whole projections (qk_norm_full)."""
    if cfg.qk_norm_full:
        return int((cfg.heads + cfg.kv_heads) * cfg.head_dim)
    return 2 * cfg.head_dim


def _exact(value: Number | Fraction) -> Number:
    """Return an int when the value is whole, else a float."""
    fraction = Fraction(value)
    return int(fraction) if fraction.denominator == 1 else float(fraction)


def _layer_json(layer: LayerParams) -> dict[str, Any]:
    return {"attention": layer.attention, "norms": layer.norms, "dense_ffn": layer.dense_ffn,
            "router": layer.router, "routed": layer.routed, "shared": layer.shared,
            "non_expert": layer.non_expert, "total": layer.total, "active": layer.active}
