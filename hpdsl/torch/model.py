"""A compiled model (ModelIR) into a torch model, layer by layer, each slot built through its family.

The model is bound to its profile first (hpdsl.bound.bind): every layer is built
from the very LayerConfig the estimator prices, so the parameters of the built
model equal `parameters(bind(model, profile)).total` exactly. A layer's kind
decides its flavours: the attention slot (`mixer`) holds full attention, a
Gated DeltaNet for a linear kind, or MLA when the model has an `mla` block;
the feed-forward slot (`ffn`) holds a dense MLP, or a MoE whose routed experts
and shared experts are families of their own. The kind's op counts fix the
rest: attMM/4 attentions (two: self and cross, in an encoder-decoder's decoder),
ffMM matrices (3 gated, 2 plain) and normOp norms; a model whose layers these
cannot hold is refused up front from hpdsl/bound/shape.py's `layer_problems`,
the very list the checker reports at compile time. Which role each slot fills
and the config it is built from come from hpdsl/bound/slots.py, which the layout
check reads too, and the role's family from hpdsl.spec.SLOT_FAMILIES.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from hpdsl.bound.bind import CostModel, bind
from hpdsl.bound.shape import layer_problems
from hpdsl.errors import BuildError
from hpdsl.ir.nodes import ModelIR
from hpdsl.registry import Registry
from hpdsl.bound.slots import (
    ModuleConfig, cross_attention_config, layer_shape, mixer_role, shared_expert_config,
)
from hpdsl.spec import SLOT_FAMILIES
from hpdsl.torch.build import RegistryLike, as_registry, construct_family
from hpdsl.torch.layers import CausalLM, DecoderLayer, MTPLayer, RelativePositionBias, Seq2SeqLM, Tower
from hpdsl.torch.mesh import JobMesh, as_job_mesh, job_context
from hpdsl.torch.modules import MLAttention, MoE
from hpdsl.torch.modules.common import make_norm
from hpdsl.torch.resolve import DEFAULT_PREFIXES, FamilyRequest, resolve_family

DEFAULT_FAMILIES: Mapping[str, str] = SLOT_FAMILIES
"""The family that fills each slot role, unless build_model is told otherwise (hpdsl.spec.SLOT_FAMILIES)."""

# Roles the standard registry has no family for yet: built directly from the reference class.
_DIRECT: Mapping[str, type[nn.Module]] = {"mla": MLAttention}


@attrs.frozen
class _Builder:
    """Everything one build_model call shares while it builds layer after layer."""

    model: ModelIR
    cost: CostModel
    registry: Registry
    job: Mapping[str, Any]
    families: Mapping[str, str]
    selectors: Mapping[str, Mapping[str, Any]]
    allowed_prefixes: tuple[str, ...]

    def layer(self, kind: str | None, fqn: str, index: int, *, causal: bool = True,
              cross: bool = False) -> DecoderLayer:
        """Build the layer `index` of `kind` at path `fqn`."""
        bound = self.cost.kind_config(kind if kind in self.cost.kinds else None)
        attentions, matrices = layer_shape(bound)  # build_model refused every shape layer_problems names
        cfg = attrs.evolve(bound, gated=matrices == 3, causal=causal)
        cross_attention = None
        if attentions == 2:
            cross_attention = self.family("attention", cross_attention_config(cfg), f"{fqn}.cross_attention",
                                          index)
        return DecoderLayer(
            mixer_norm=make_norm(cfg, cfg.hidden), mixer=self.mixer(cfg, f"{fqn}.mixer", index),
            cross_norm=make_norm(cfg, cfg.hidden) if cross_attention is not None else None,
            cross_attention=cross_attention,
            ffn_norm=make_norm(cfg, cfg.hidden) if matrices else None,
            ffn=self.ffn(cfg, f"{fqn}.ffn") if matrices else None,
        )

    def mixer(self, cfg: ModuleConfig, fqn: str, index: int) -> nn.Module:
        """Build the attention slot: full attention, linear attention or MLA, as the kind says."""
        return self.family(mixer_role(cfg), cfg, fqn, index)

    def ffn(self, cfg: ModuleConfig, fqn: str) -> nn.Module:
        """Build the feed-forward slot: a dense MLP, or a MoE of routed and shared experts."""
        if cfg.experts <= 1:
            return self.family("mlp", cfg, fqn)
        experts = self.family("experts", cfg, f"{fqn}.experts")
        shared = [self.family("shared_experts", shared_expert_config(cfg), f"{fqn}.shared_experts.{i}")
                  for i in range(cfg.shared_experts)]
        return MoE(cfg, experts, shared)

    def family(self, role: str, cfg: ModuleConfig, fqn: str, index: int | None = None) -> nn.Module:
        """Resolve the family of `role` for this job at `fqn` and construct it from `cfg`."""
        name = self.families.get(role, DEFAULT_FAMILIES[role])
        if name not in self.registry.families:
            if role in _DIRECT:
                return _DIRECT[role](cfg, layer_index=index or 0, context=self.job, module_fqn=fqn)
            raise BuildError(f"{fqn}: the registry has no family '{name}' for the {role} slot")
        family = self.registry.families[name]
        arguments = dict(self.selectors.get(role, {}))
        if "gating" in {s.name for s in family.selectors}:
            arguments.setdefault("gating", "gated" if cfg.gated else "plain")
        request = FamilyRequest(family, arguments)
        resolved = resolve_family(request, self.job, module_fqn=fqn, allowed_prefixes=self.allowed_prefixes)
        if index is not None and "layer_index" in resolved.variant.accepts and "layer_index" not in arguments:
            request = request.with_arguments(layer_index=index)
            resolved = resolve_family(request, self.job, module_fqn=fqn,
                                      allowed_prefixes=self.allowed_prefixes)
        return construct_family(request, resolved, config=cfg, module_fqn=fqn, context=self.job,
                                allowed_prefixes=self.allowed_prefixes)


def build_model(model_spec: ModelIR | str, mesh: DeviceMesh | JobMesh | None = None, *,
                registry: RegistryLike | None = None, device: str | torch.device = "meta",
                dtype: torch.dtype | None = None, context: Mapping[str, Any] | None = None,
                expert_mesh: DeviceMesh | None = None, families: Mapping[str, str] | None = None,
                selectors: Mapping[str, Mapping[str, Any]] | None = None, include_mtp: bool = False,
                allowed_prefixes: Sequence[str] = DEFAULT_PREFIXES) -> nn.Module:
    """Build the model a ModelIR (or a model name in the registry) describes, for a job's mesh."""
    reg = as_registry(registry)
    model = reg.model(model_spec) if isinstance(model_spec, str) else model_spec
    job = job_context(as_job_mesh(mesh, expert_mesh), context, where=model.name)
    builder = _Builder(model, bind(model, reg.profile(model.profile)), reg, job,
                       {**DEFAULT_FAMILIES, **(families or {})}, dict(selectors or {}),
                       tuple(allowed_prefixes))
    _refuse_problems(builder.cost)
    unknown = sorted(set(builder.selectors) - set(DEFAULT_FAMILIES))
    if unknown:
        raise BuildError(f"{model.name}: selectors name unknown slot roles {unknown}; "
                         f"the roles are {sorted(DEFAULT_FAMILIES)}")
    with torch.device(device):
        built = _build(builder, include_mtp)
    if dtype is not None:
        built = built.to(dtype)
    built.__dict__["hpdsl_model"] = model  # plain data, for explain and the caller
    return built


def _build(builder: _Builder, include_mtp: bool) -> nn.Module:
    model = builder.model
    cfg = builder.cost.base
    embed = nn.Embedding(model.vocab, model.hidden)
    head = None if model.tie_embeddings else nn.Linear(model.hidden, model.vocab, bias=False)
    kinds = {g.kind for g in model.groups}
    if {"encoder", "decoder"} <= kinds:
        encoder = _tower(builder, cfg, "encoder", causal=False)
        decoder = _tower(builder, cfg, "decoder", causal=True)
        return Seq2SeqLM(embed=embed, encoder=encoder, decoder=decoder, head=head)
    body = [g.kind for g in model.groups if not g.mtp for _ in range(g.count)]
    layers = [builder.layer(kind, f"layers.{i}", i) for i, kind in enumerate(body)]
    mtp = _mtp_layers(builder, cfg, len(body)) if include_mtp else None
    job_mesh: JobMesh | None = builder.job["mesh"]
    cp_rank = job_mesh.local_rank("cp") if job_mesh is not None and builder.job["cp_size"] > 1 else 0
    return CausalLM(embed=embed, layers=layers, norm=make_norm(cfg, model.hidden), head=head,
                    position_bias=_position_bias(model, bidirectional=False), mtp=mtp, cp_rank=cp_rank)


def _tower(builder: _Builder, cfg: ModuleConfig, kind: str, *, causal: bool) -> Tower:
    kinds = [g.kind for g in builder.model.groups if g.kind == kind and not g.mtp for _ in range(g.count)]
    layers = [builder.layer(k, f"{kind}.layers.{i}", i, causal=causal, cross=kind == "decoder")
              for i, k in enumerate(kinds)]
    return Tower(layers, make_norm(cfg, cfg.hidden), _position_bias(builder.model, bidirectional=not causal))


def _mtp_layers(builder: _Builder, cfg: ModuleConfig, first: int) -> list[nn.Module]:
    kinds = [g.kind for g in builder.model.groups if g.mtp for _ in range(g.count)]
    return [MTPLayer(embed_norm=make_norm(cfg, cfg.hidden), hidden_norm=make_norm(cfg, cfg.hidden),
                     hidden=cfg.hidden, layer=builder.layer(kind, f"mtp.{j}.layer", first + j),
                     norm=make_norm(cfg, cfg.hidden))
            for j, kind in enumerate(kinds)]


def _position_bias(model: ModelIR, *, bidirectional: bool) -> RelativePositionBias | None:
    if not model.position_buckets:
        return None
    return RelativePositionBias(model.position_buckets, model.heads, bidirectional=bidirectional)


def _refuse_problems(cost: CostModel) -> None:
    """Raise BuildError naming every layer the checker would have reported (hpdsl/bound/shape.py)."""
    problems = layer_problems(cost)
    if problems:
        found = "; ".join(f"{p.message} ({p.code}: {p.hint})" for p in problems)
        raise BuildError(f"{cost.model.name}: cannot be built as priced: {found}")


def materialize(model: nn.Module, device: str | torch.device = "cpu", *, std: float = 0.02,
                seed: int | None = None) -> nn.Module:
    """Allocate a meta-built model on `device` and initialise every parameter (in place)."""
    if seed is not None:
        torch.manual_seed(seed)
    model.to_empty(device=device)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Conv1d, nn.Embedding)):
                nn.init.normal_(module.weight, std=std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif hasattr(module, "reset_parameters"):
                module.reset_parameters()
    return model


__all__ = ["DEFAULT_FAMILIES", "build_model", "materialize"]
