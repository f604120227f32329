"""A compiled model (ModelIR) into a torch model, layer by layer, each slot built through its family.

The model is bound to its profile first (hpdsl.bound.bind): every layer is built
from the very LayerConfig the estimator prices, each slot through the family whose
layout the estimator sums (hpdsl/torch/layout.py holds the module to it), so the
parameters of the built model equal `parameters(bind(model, profile, families=...)).total`
exactly. A layer's kind
decides its flavours: the attention slot (`mixer`) holds full attention, a
Gated DeltaNet for a linear kind, or MLA when the model has an `mla` block;
the feed-forward slot (`ffn`) holds a dense MLP, or a MoE whose routed experts
and shared experts are families of their own. The kind's op counts fix the
rest: attMM/4 attentions (two: self and cross, in an encoder-decoder's decoder),
ffMM matrices (3 gated, 2 plain) and normOp norms, placed by the model's
wiring (hpdsl/bound/wiring.py); a model whose layers these
cannot hold is refused up front from hpdsl/bound/shape.py's `layer_problems`,
the very list the checker reports at compile time. Which role each slot fills
and the config it is built from come from hpdsl/bound/slots.py, which the layout
check reads too; the family filling each slot (norms, embedding and head
included) is the kind's binding from `.hpf` `slots { ... }` blocks, unless the
caller names another.
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
from hpdsl.bound.config import ModuleConfig
from hpdsl.bound.slots import (BESIDE_PATHS, Slot, end_slots, ffn_slots, kind_bindings, layer_config, layer_shape,
                               layer_slots, mtp_slots)
from hpdsl.errors import BuildError
from hpdsl.ir.nodes import FamilyIR, ModelIR, evolve
from hpdsl.model.axes import config_selectors as model_selectors
from hpdsl.model.slots import SLOTS
from hpdsl.registry import Registry
from hpdsl.torch.build import RegistryLike, as_registry, construct_family
from hpdsl.torch.init import draw
from hpdsl.torch.layers import GATE_PATHS, HYPER_PATHS, NORM_PATHS, CausalLM, DecoderLayer, MTPLayer, Seq2SeqLM, Tower
from hpdsl.torch.mesh import ContextLike, JobContext, JobMesh, as_job_mesh, job_context
from hpdsl.torch.modules import Attention, MoE, MoEBesideMLP
from hpdsl.torch.resolve import DEFAULT_PREFIXES, FamilyRequest, resolve_family


_FFN_ROLES = ("mlp", "router", "experts", "shared_experts", "shared_gate", "latent_proj")


@attrs.frozen
class _Builder:
    """Everything one build_model call shares while it builds layer after layer."""

    model: ModelIR
    cost: CostModel
    registry: Registry
    job: JobContext
    families: Mapping[str, str]
    selectors: Mapping[str, Mapping[str, Any]]
    allowed_prefixes: tuple[str, ...]

    def layer(self, kind: str | None, fqn: str, index: int, *, causal: bool = True) -> DecoderLayer:
        """Build the layer `index` of `kind` at path `fqn`, each slot through the family bound to it."""
        bound = self.cost.kind_config(kind if kind in self.cost.kinds else None)
        attentions, matrices = layer_shape(bound)  # build_model refused every shape layer_problems names
        built = {slot.path: self.slot(slot, f"{fqn}.{slot.path}", index)
                 for slot in layer_slots(bound, self.bindings(kind), causal=causal)
                 if slot.role not in _FFN_ROLES and not slot.path.startswith("ffn.")}  # ffn() assembles those
        cfg = layer_config(bound, causal=causal)
        return DecoderLayer(
            mixer=built.get("mixer"), cross_attention=built.get("cross_attention"),
            ffn=self.ffn(cfg, kind, f"{fqn}.ffn") if matrices else None, wiring=cfg.wiring,
            norms={path: module for path, module in built.items() if path in NORM_PATHS},
            gates={path: module for path, module in built.items() if path in GATE_PATHS},
            per_layer_input=built.get("per_layer_input"),
            hyper={path: module for path, module in built.items() if path in HYPER_PATHS},
        )

    def ffn(self, cfg: ModuleConfig, kind: str | None, fqn: str) -> nn.Module:
        """Build the feed-forward slot: a dense MLP, or a MoE of routed and shared experts."""
        slots = ffn_slots(cfg, self.bindings(kind))
        if cfg.experts <= 1:
            return self.slot(slots[0], fqn)
        built = [(slot.role, self.slot(slot, f"{fqn}.{slot.path.removeprefix('ffn.')}")) for slot in slots]
        by_role = dict(built)
        if cfg.beside_width:  # a dense MLP beside the experts, the branches' norms (beside_slots)
            paths = {slot.path.removeprefix("ffn."): module for slot, (_, module) in zip(slots, built, strict=True)}
            return MoEBesideMLP(cfg, by_role["router"], by_role["experts"], mlp=paths["mlp"],
                                norms={name: paths[name] for name in BESIDE_PATHS[1:]})
        shared = [module for role, module in built if role == "shared_experts"]
        return MoE(cfg, by_role["router"], by_role["experts"], shared, by_role.get("shared_gate"),
                   by_role.get("latent_proj"))

    def bindings(self, kind: str | None) -> Mapping[str, str]:
        """Return which family fills each slot in layers of `kind`: the .hpf bindings, then the caller's."""
        return {**kind_bindings(self.cost, kind), **self.families}

    def end(self, role: str, fqn: str, config: ModuleConfig | None = None) -> nn.Module:
        """Build a model-level slot (embedding, final norm, head) through the family bound to it."""
        bindings = {**self.cost.profile.slots, **self.families}
        return self.slot(Slot(role, fqn, config or self.cost.base, bindings.get(role, "")), fqn)

    def slot(self, slot: Slot, fqn: str, index: int | None = None) -> nn.Module:
        """Resolve the family bound to `slot` for this job at `fqn` and construct it from the slot's config."""
        family = self.registry.families.get(slot.family)
        if family is None:
            raise BuildError(f"{fqn}: the {slot.role} slot is bound to family '{slot.family}', which the "
                             f"registry does not hold; bind it in a `slots {{ ... }}` block")
        arguments = {**config_selectors(family, slot.config), **self.selectors.get(slot.role, {})}
        request = FamilyRequest(family, arguments)
        resolved = resolve_family(request, self.job, module_fqn=fqn, allowed_prefixes=self.allowed_prefixes)
        if index is not None and "layer_index" in resolved.variant.accepts and "layer_index" not in arguments:
            request = request.with_arguments(layer_index=index)
            resolved = resolve_family(request, self.job, module_fqn=fqn,
                                      allowed_prefixes=self.allowed_prefixes)
        return construct_family(request, resolved, config=slot.config, module_fqn=fqn, context=self.job,
                                allowed_prefixes=self.allowed_prefixes)


def config_selectors(family: FamilyIR, config: ModuleConfig) -> dict[str, Any]:
    """Return the family's selectors named like a config field, at the config's value (`norm`, `mlp`).

    A selector that shares a field's name follows the model: the norm family picks
    LayerNorm for `norm layernorm`, the mlp family its plain form for a 2-matrix
    feed-forward. An explicit selector from the caller still wins.
    """
    return dict(model_selectors(family, config))


def build_model(model_spec: ModelIR | str, mesh: DeviceMesh | JobMesh | None = None, *,
                registry: RegistryLike | None = None, device: str | torch.device = "meta",
                dtype: torch.dtype | None = None, context: ContextLike = None,
                expert_mesh: DeviceMesh | None = None, families: Mapping[str, str] | None = None,
                selectors: Mapping[str, Mapping[str, Any]] | None = None, include_mtp: bool = False,
                allowed_prefixes: Sequence[str] = DEFAULT_PREFIXES) -> nn.Module:
    """Build the model a ModelIR (or a model name in the registry) describes, for a job's mesh."""
    reg = as_registry(registry)
    model = reg.model(model_spec) if isinstance(model_spec, str) else model_spec
    job = job_context(as_job_mesh(mesh, expert_mesh), context, where=model.name)
    builder = _Builder(model, bind(model, reg.profile(model.profile), families=reg.families), reg, job,
                       dict(families or {}), dict(selectors or {}), tuple(allowed_prefixes))
    _refuse_problems(builder.cost)
    unknown = sorted((set(builder.selectors) | set(builder.families)) - set(SLOTS))
    if unknown:
        raise BuildError(f"{model.name}: families or selectors name unknown slots {unknown}; "
                         f"the slots are {sorted(SLOTS)}")
    with torch.device(device):
        built = _build(builder, include_mtp)
    if dtype is not None:
        built = built.to(dtype)
    built.__dict__["hpdsl_model"] = model  # plain data, for explain and the caller
    return built


def _build(builder: _Builder, include_mtp: bool) -> nn.Module:
    model = builder.model
    cfg = builder.cost.base
    kinds = {g.kind for g in model.groups}
    if {"encoder", "decoder"} <= kinds:
        embed = builder.end("embedding", "embed")
        head = None if model.tie_embeddings else builder.end("head", "head")
        encoder = _tower(builder, cfg, "encoder", causal=False)
        decoder = _tower(builder, cfg, "decoder", causal=True)
        return Seq2SeqLM(embed=embed, encoder=encoder, decoder=decoder, head=head)
    # The model's outer wiring (embedding, projections, embedding norm, positions, final norm, head) is
    # the list the estimator prices (hpdsl/bound/slots.py end_slots): each built through its family.
    ends = {slot.path: builder.end(slot.role, slot.path, slot.config) for slot in end_slots(builder.cost)}
    body = [g.kind for g in model.groups if not g.mtp for _ in range(g.count)]
    layers = [builder.layer(kind, f"layers.{i}", i) for i, kind in enumerate(body)]
    link_shared_kv(layers)
    mtp = _mtp_layers(builder, len(body)) if include_mtp else None
    return CausalLM(embed=ends["embed"], layers=layers, norm=ends.get("norm"), head=ends.get("head"),
                    position_bias=ends.get("position_bias"), mtp=mtp,
                    cp_rank=builder.job.local_rank("cp"), positions=ends.get("positions"),
                    logit_softcap=float(model.final_softcap or 0.0), project_in=ends.get("project_in"),
                    project_out=ends.get("project_out"), embed_norm=ends.get("embed_norm"),
                    position_offset=int(model.position_offset or 0),
                    per_layer={path: ends[path] for path in ("per_layer_embed", "per_layer_proj", "per_layer_norm")
                               if path in ends}, hc_head=ends.get("hc_head"))


def link_shared_kv(layers: Sequence[nn.Module]) -> None:
    """Link each kv_shared attention to the last earlier one with its window and head shapes that has its own.

    As transformers' Gemma 4 (kv_sharing_modes): a layer of the last num_kv_shared_layers
    reuses the keys and values of the last earlier layer of its attention type, which
    keeps them at each forward. Raise BuildError naming a layer with none to reuse.
    """
    last: dict[tuple[int, int, int, int], Attention] = {}
    for i, layer in enumerate(layers):
        mixer = getattr(layer, "mixer", None)
        if not isinstance(mixer, Attention):
            continue
        cfg = mixer.config
        key = (int(cfg.window), int(cfg.head_dim), int(cfg.kv_heads), int(mixer.v_dim))
        if not cfg.kv_shared:
            last[key] = mixer
            continue
        source = last.get(key)
        if source is None:
            raise BuildError(f"layers.{i}: a kv_shared layer reuses the keys and values of an earlier layer with "
                             f"its window {cfg.window} and head shapes (head_dim {cfg.head_dim}, kv_heads "
                             f"{cfg.kv_heads}), but no earlier layer computes its own; put such a layer before it")
        source.keeps_kv = True
        mixer.kv_source[:] = [source]


def _tower(builder: _Builder, cfg: ModuleConfig, kind: str, *, causal: bool) -> Tower:
    kinds = [g.kind for g in builder.model.groups if g.kind == kind and not g.mtp for _ in range(g.count)]
    layers = [builder.layer(k, f"{kind}.layers.{i}", i, causal=causal)
              for i, k in enumerate(kinds)]
    return Tower(layers, builder.end("norm", f"{kind}.norm"), _position_bias(builder, f"{kind}.position_bias"))


def _mtp_layers(builder: _Builder, first: int) -> list[nn.Module]:
    """Build each MTP layer: its decoder layer and the slots beside it (norms, eh_proj), each through its family."""
    kinds = [g.kind for g in builder.model.groups if g.mtp for _ in range(g.count)]
    slots = mtp_slots(builder.cost)  # the estimator prices the same slots (hpdsl/cost/facts/params.py)
    layers: list[nn.Module] = []
    for j, kind in enumerate(kinds):
        built = {slot.path: builder.end(slot.role, f"mtp.{j}.{slot.path}", slot.config) for slot in slots}
        layers.append(MTPLayer(enorm=built["enorm"], hnorm=built["hnorm"], eh_proj=built["eh_proj"],
                               layer=builder.layer(kind, f"mtp.{j}.layer", first + j), norm=built["norm"]))
    return layers


def _position_bias(builder: _Builder, fqn: str) -> nn.Module | None:
    """Build a tower's relative-position bias table through its slot's family (None without position_buckets)."""
    slot = next((s for s in end_slots(builder.cost) if s.path == fqn), None)
    return None if slot is None else builder.end("position_bias", fqn, slot.config)


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
    for module in model.modules():
        draw(module, std)
    return model


__all__ = ["build_model", "config_selectors", "materialize"]
