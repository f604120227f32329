"""Reference mixture-of-experts: the router, its routing rule, the shared-expert gate and the MoE container.

The routed experts (the `grouped_experts` family) are hpdsl/torch/modules/experts.py's;
their names are importable from here too. Routing weights are applied after the
experts' second GEMM, outside the expert math, or, with router_scales_input (Llama 4), to each
(token, expert) pair's input before them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import attrs
import torch
from torch import Tensor, nn
from torch.distributed.tensor import DTensor, Partial

from hpdsl.errors import BuildError
from hpdsl.ir.nodes import evolve
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.modules.experts import ExpertParallelExperts, GroupedExperts, MXFP8GroupedExperts, mxfp8_round


class Router(nn.Linear):
    """The `router` family: one score per routed expert for every token, biased with router_bias.

    With router_correction it holds transformers' e_score_correction_bias as a
    buffer (a state-dict entry, not a parameter: the count stays transformers'), or, with
    router_correction_counted, as a frozen parameter (Laguna's: transformers counts it).
    """

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__(config.hidden, config.experts, bias=config.router_bias)
        if getattr(config, "router_correction", False) and getattr(config, "router_correction_counted", False):
            self.e_score_correction_bias = nn.Parameter(torch.zeros(config.experts), requires_grad=False)
        elif getattr(config, "router_correction", False):
            self.register_buffer("e_score_correction_bias", torch.zeros(config.experts))

    def reset_state(self) -> None:
        """Zero the score correction (transformers' initial value), if the router holds one (a meta build's gap)."""
        correction = getattr(self, "e_score_correction_bias", None)
        if isinstance(correction, Tensor):
            with torch.no_grad():
                correction.zero_()


class ScaledRouter(Router):
    """The `scaled_router` family (Gemma 4's router): scores of the token RMS-normalised without a weight, times `scale`.

    As transformers' Gemma4TextRouter: the token normalised in float32, times the
    learnt per-channel `scale` and 1/√hidden, projected; MoE multiplies each chosen
    expert's routing weight by its learnt `per_expert_scale` (`expert_scales`).
    """

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__(config)
        self.eps = float(getattr(config, "norm_eps", 1e-6) or 1e-6)
        self.scale = nn.Parameter(torch.ones(config.hidden))
        self.per_expert_scale = nn.Parameter(torch.ones(config.experts))

    def reset_parameters(self) -> None:
        """Initialise the projection as a linear layer's, the two scales to ones (transformers' values)."""
        super().reset_parameters()
        if hasattr(self, "per_expert_scale"):  # nn.Linear's constructor calls this before they exist
            self.reset_state()

    def reset_state(self) -> None:
        """Set the two scales to ones: a meta build's initialisation draws only a linear's weight and bias."""
        super().reset_state()
        with torch.no_grad():
            self.scale.fill_(1.0)
            self.per_expert_scale.fill_(1.0)

    def forward(self, x: Tensor) -> Tensor:
        """Return every token's expert scores [t, E] from `x` [t, h]."""
        normed = x.float() * torch.pow(x.float().pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        return super().forward((normed * self.scale.float() * x.shape[-1] ** -0.5).type_as(x))


class HashRouter(Router):
    """The `hash_router` family (DeepSeek-V4's hash-routed layers): the experts are a frozen lookup of the token id.

    As transformers' DeepseekV4HashRouter: `tid2eid` [vocab, top_k] (a buffer loaded with the
    weights, zeros at initialisation) names each token's experts; the learnt weight scores them (no score
    correction: the lookup chooses).
    """

    by_ids = True

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__(evolve(config, router_correction=False))
        self.register_buffer("tid2eid", torch.zeros(config.vocab, config.top_k, dtype=torch.long))

    def reset_state(self) -> None:
        """Zero the lookup (transformers' initial value; a checkpoint's comes with the weights)."""
        super().reset_state()
        with torch.no_grad():
            self.get_buffer("tid2eid").zero_()


def expert_scales(router: nn.Module, weights: Tensor, indices: Tensor) -> Tensor:
    """Return the routing weights times each chosen expert's learnt scale where the router holds one (Gemma 4)."""
    scale = getattr(router, "per_expert_scale", None)
    if isinstance(scale, DTensor):
        # A router that runs on this tp rank's chunk (SequenceParallel, hpdsl/torch/sequence.py) holds the scale
        # replicated; this rank's tokens give its part of the gradient, which the tp ranks sum.
        scale = scale.to_local(grad_placements=[Partial() if p.is_replicate() else p for p in scale.placements])
    return weights if not isinstance(scale, Tensor) else weights * scale[indices]


@attrs.frozen
class Routing:
    """How a MoE block picks and weighs each token's experts from the router's logits (docs/torch.md#moe-routing)."""

    top_k: int
    sigmoid: bool = False
    sqrtsoftplus: bool = False
    groups: int = 1
    group_top: int = 1
    renormalise: bool = True
    scale: float = 1.0
    scales_input: bool = False

    @classmethod
    def of(cls, config: ModuleConfig) -> Routing:
        """Return the routing a layer's config states (the moe block's router fields)."""
        return cls(config.top_k, bool(getattr(config, "router_sigmoid", False)),
                   bool(getattr(config, "router_sqrtsoftplus", False)), getattr(config, "router_groups", 1) or 1, getattr(config, "router_group_top", 1) or 1,
                   bool(getattr(config, "norm_top_k", True)), float(getattr(config, "routed_scale", 1.0) or 1.0),
                   bool(getattr(config, "router_scales_input", False)))

    def route(self, logits: Tensor, correction: Tensor | None = None,
              indices: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Return (weights, indices) [t, k] of every token's experts from the router logits [t, E] (float32).

        `indices` given (a hash router's lookup) are the experts; the scores only weigh them.
        """
        scores = self.scores(logits.float())
        if indices is None:
            choice = scores if correction is None else scores + correction.float()
            if self.groups > 1:
                choice = self._group_limited(choice)
            indices = choice.topk(self.top_k, dim=-1)[1]
        weights = scores.gather(1, indices)
        if self.renormalise:
            elementwise = self.sigmoid or self.sqrtsoftplus
            weights = weights / (weights.sum(-1, keepdim=True) + (1e-20 if elementwise else 0.0))
        return weights * self.scale, indices

    def scores(self, logits: Tensor) -> Tensor:
        """Return each expert's score: a sigmoid, √softplus (DeepSeek-V4) or the softmax over the experts."""
        if self.sqrtsoftplus:
            return torch.nn.functional.softplus(logits).sqrt()
        return logits.sigmoid() if self.sigmoid else logits.softmax(-1)

    def _group_limited(self, choice: Tensor) -> Tensor:
        """Mask out the experts outside each token's group_top best groups (a group's score: its two best)."""
        grouped = choice.view(choice.shape[0], self.groups, -1)
        best = grouped.topk(min(2, grouped.shape[-1]), dim=-1)[0].sum(-1)
        keep = torch.zeros_like(best).scatter_(1, best.topk(self.group_top, dim=-1)[1], 1.0)
        mask = keep.unsqueeze(-1).expand_as(grouped).reshape_as(choice).bool()
        return choice.masked_fill(~mask, float("-inf"))


class SharedExpertGate(nn.Linear):
    """The `shared_gate` family: one sigmoid gate value per token over the shared experts' sum."""

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__(config.hidden, 1, bias=False)


class MoELatentProjection(nn.Module):
    """The `moe_latent_projection` family: hidden → latent_width before the routed experts, and back after."""

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        bias = bool(getattr(config, "mlp_bias", False))
        self.fc1_latent_proj = nn.Linear(config.hidden, config.latent_width, bias=bias)
        self.fc2_latent_proj = nn.Linear(config.latent_width, config.hidden, bias=bias)


def latent_projections(module: nn.Module) -> tuple[nn.Module, nn.Module]:
    """Return a latent_proj module's (fc1_latent_proj, fc2_latent_proj): into the latent and back out.

    Whichever family fills the slot, its module holds the two projections by these names
    (families/router.hpf's moe_latent_projection declares them as its params).
    """
    pair = getattr(module, "fc1_latent_proj", None), getattr(module, "fc2_latent_proj", None)
    if not all(isinstance(part, nn.Module) for part in pair):
        raise BuildError(f"the latent_proj slot's {type(module).__name__} holds no fc1_latent_proj and "
                         "fc2_latent_proj modules (the routed experts' projections into the latent and back)")
    return cast(tuple[nn.Module, nn.Module], pair)  # both checked to be modules just above


class MoE(nn.Module):
    """Router, routed experts (behind latent projections with latent_width), optional gated shared experts, each a slot."""

    def __init__(self, config: ModuleConfig, router: nn.Module, experts: nn.Module,
                 shared: Sequence[nn.Module] = (), gate: nn.Module | None = None,
                 latent: nn.Module | None = None) -> None:
        super().__init__()
        self.top_k = config.top_k
        self.routing = Routing.of(config)
        self.router = router
        self.experts = experts
        self.shared_experts = nn.ModuleList(shared) if shared else None
        self.shared_expert_gate = gate
        self.latent_proj = latent  # transformers' NemotronHMoE: the routed experts see latent_width-wide tokens
        if latent is not None:
            latent_projections(latent)  # refused now, not at the first forward
        self.routes_chunk = False  # each tp rank routes its own sequence chunk (hpdsl/torch/sequence.py)

    @property
    def by_ids(self) -> bool:
        """Whether the router picks the experts by token id (a hash router): forward needs `ids`."""
        return bool(getattr(self.router, "by_ids", False))

    def forward(self, x: Tensor, ids: Tensor | None = None) -> Tensor:
        """Route every token of `x` [..., h] to its top-k experts (by its id `ids` [...] for a hash router), add the shared."""
        return self.routed(x, ids=ids)

    def routed(self, x: Tensor, routed_by: Tensor | None = None, *, ids: Tensor | None = None) -> Tensor:
        """Return the experts' output for `x` [..., h], each token routed by its row of `routed_by` (default `x`)."""
        flat = x.reshape(-1, x.shape[-1])
        correction = getattr(self.router, "e_score_correction_bias", None)
        if isinstance(correction, DTensor):  # a replicated buffer (FSDP2, or tp's SequenceParallel on the router)
            correction = correction.to_local()
        # Routed by `x` itself, no second reshape: the eager calls stay what families/router.hpf counts.
        scored = flat if routed_by is None else routed_by.reshape(flat.shape)
        looked_up = None
        if self.by_ids:
            if ids is None:
                raise BuildError("a hash-routed MoE layer picks its experts by token id: it needs the tokens' ids")
            looked_up = self.router.get_buffer("tid2eid")[ids.reshape(-1)]
        weights, indices = self.routing.route(self.router(scored), correction, looked_up)
        weights = expert_scales(self.router, weights, indices)
        rows = flat
        if self.routing.scales_input:  # Llama 4: each (token, expert) pair a row of its own, scaled before
            rows = (flat.unsqueeze(1) * weights.unsqueeze(-1).to(flat.dtype)).flatten(0, 1)
            indices, weights = indices.reshape(-1, 1), weights.new_ones(indices.numel(), 1)
        if self.latent_proj is None:
            out = self.experts(rows, indices, weights.to(flat.dtype))
        else:  # the router read the hidden vector; the experts read and write the latent one
            # Looked up at each call: a conversion (float8) may swap either projection in place.
            into, back = latent_projections(self.latent_proj)
            out = back(self.experts(into(rows), indices, weights.to(flat.dtype)))
        if self.routing.scales_input:  # ... and its k outputs summed as they are
            out = out.unflatten(0, (flat.shape[0], -1)).sum(1)
        if self.shared_experts is not None:
            shared = sum(expert(flat) for expert in self.shared_experts)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(flat)) * shared
            out = out + shared
        return out.reshape(x.shape)


class MoEBesideMLP(MoE):
    """A MoE block with a dense MLP beside it, each branch normed after (moe's mlp_beside; Gemma 4's enable_moe_block).

    As transformers' Gemma4TextDecoderLayer: given the layer's normed input `x` and its
    residual stream, the MLP reads `x` and is normed after (mlp_post_norm); the router
    reads the residual stream and the experts their own norm of it (moe_norm), normed
    after (moe_post_norm); the two are summed. Each module is a slot
    (hpdsl/bound/slots.py `beside_slots`); DecoderLayer hands the residual over
    (`reads_residual`).
    """

    reads_residual = True

    def __init__(self, config: ModuleConfig, router: nn.Module, experts: nn.Module, *, mlp: nn.Module,
                 norms: dict[str, nn.Module]) -> None:
        super().__init__(config, router, experts)
        self.mlp = mlp
        self.mlp_post_norm, self.moe_norm, self.moe_post_norm = (
            norms["mlp_post_norm"], norms["moe_norm"], norms["moe_post_norm"])

    def forward(self, x: Tensor, residual: Tensor | None = None) -> Tensor:
        """Return the normed MLP output of `x` plus the normed experts' output of the residual stream."""
        stream = x if residual is None else residual
        return self.mlp_post_norm(self.mlp(x)) + self.moe_post_norm(self.routed(self.moe_norm(stream), stream))


__all__ = ["ExpertParallelExperts", "GroupedExperts", "MXFP8GroupedExperts", "MoE", "MoEBesideMLP", "MoELatentProjection", "HashRouter", "Router",
           "ScaledRouter", "expert_scales", "latent_projections",
           "Routing",
           "SharedExpertGate", "mxfp8_round"]
