"""Routed experts: the `grouped_experts` family's local, expert-parallel and MXFP8 variants.

`GroupedExperts` packs every expert's weights in grouped tensors
(gate_up_proj [E, h, 2w] or up_proj [E, h, w] when ungated, down_proj [E, w, h]);
it is built from a config or, as a replacement, from an existing experts module
(its own layout is aliased; Transformers' [E, 2w, h] / [E, h, w] is transposed).
`ExpertParallelExperts` holds E/ep experts per rank and exchanges tokens with
all-to-all over the ep axis; under etp (expert tensor parallelism, Megatron's)
it holds 1/etp of each expert's width (up/gate by columns, down by rows), gathers
the routed tokens of its etp peers, and returns each peer the sum of the partial
outputs (a reduce-scatter written as an all-to-all and a sum: sizes differ);
`MXFP8GroupedExperts` runs the expert GEMMs on
MXFP8-rounded operands (a numerical reference of the kernel, not a fast path).
Routing weights are applied after the second GEMM, outside the expert math; the
router and the MoE container are hpdsl/torch/modules/moe.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import Tensor, nn

from hpdsl.errors import BuildError
from hpdsl.torch.config import ModuleConfig
from hpdsl.torch.mesh import ContextLike, JobContext, JobMesh
from hpdsl.torch.modules.collectives import all_to_all, exchange_counts
from hpdsl.torch.modules.common import activate, activation, gated_unit, job_of
from hpdsl.torch.modules.fused import fused
from hpdsl.torch.modules.grouped import expert_of_rows, grouped_applies, grouped_mm, offsets_of


class GroupedExperts(nn.Module):
    """All routed experts of a layer in grouped tensors (the `local` variant)."""

    def __init__(self, config: ModuleConfig | None = None, *, module: nn.Module | None = None,
                 module_fqn: str = "", context: ContextLike = None) -> None:
        super().__init__()
        self.where = f"{module_fqn or '<root>'}: {type(self).__name__}"
        self.act = activation(config.activation if config is not None else "silu")
        self.unit = gated_unit(config)
        self.interleaved = bool(config.glu_interleaved) if config is not None else False
        self.first, self.local, self.etp, self.etp_rank = 0, 0, 1, 0
        self.setup_parallel(job_of(context, module_fqn))
        if module is not None:
            self._adopt(module)
            return
        if config is None:
            raise BuildError(f"{self.where} needs a config or a source module")
        self._allocate(config)

    # --- construction ----------------------------------------------------

    def setup_parallel(self, job: JobContext) -> None:
        """Read what the variant needs from the job (nothing: every expert is local)."""

    def experts_here(self, experts: int) -> tuple[int, int]:
        """Return (first expert, number of experts) this rank holds: all of them."""
        return 0, experts

    def _allocate(self, config: ModuleConfig) -> None:
        self.num_experts, self.hidden, self.width = config.experts, config.hidden, config.ffn_width // self.etp
        self.gated = config.gated
        self.first, self.local = self.experts_here(config.experts)
        bias = config.mlp_bias and config.expert_bias  # families/grouped_experts.hpf
        if config.ffn_width % self.etp or (self.etp > 1 and bias):
            raise BuildError(f"{self.where}: etp={self.etp} needs bias-free experts whose width "
                             f"{config.ffn_width} it divides")
        e, h, w = self.local, self.hidden, self.width
        up = 2 * w if self.gated else w
        self.gate_up_proj = nn.Parameter(torch.empty(e, h, up)) if self.gated else None
        self.up_proj = None if self.gated else nn.Parameter(torch.empty(e, h, up))
        self.down_proj = nn.Parameter(torch.empty(e, w, h))
        self.up_bias = nn.Parameter(torch.empty(e, up)) if bias else None
        self.down_bias = nn.Parameter(torch.empty(e, h)) if bias else None
        self.reset_parameters()

    def _adopt(self, module: nn.Module) -> None:
        """Take the weights of an existing experts module (replacement), aliasing or transposing them."""
        if self.etp > 1:
            raise BuildError(f"{self.where}: replacing an existing experts module is not built for etp={self.etp}")
        weights: dict[str, nn.Parameter] = {}
        for name in ("gate_up_proj", "down_proj"):
            value = getattr(module, name, None)
            if not isinstance(value, nn.Parameter):
                found = "none" if value is None else type(value).__name__
                raise BuildError(f"{self.where}: the source module's '{name}' must be a Parameter, found {found}")
            if value.dim() != 3:
                raise BuildError(f"{self.where}: the source '{name}' must be 3-D [experts, ...], "
                                 f"found shape {tuple(value.shape)}")
            weights[name] = value
        if any(getattr(module, n, None) is not None for n in ("gate_up_proj_bias", "down_proj_bias")):
            raise BuildError(f"{self.where}: source experts with biases are not supported")
        gate_up, down = weights["gate_up_proj"], weights["down_proj"]
        ours = gate_up.shape[1] == down.shape[2] and gate_up.shape[2] == 2 * down.shape[1]
        theirs = gate_up.shape[1] == 2 * down.shape[2] and gate_up.shape[2] == down.shape[1]
        if gate_up.shape[0] != down.shape[0] or not (ours or theirs):
            raise BuildError(f"{self.where}: incompatible source shapes gate_up_proj {tuple(gate_up.shape)} "
                             f"and down_proj {tuple(down.shape)}")
        if theirs:  # Transformers keeps [E, 2w, h] and [E, h, w]
            gate_up, down = (_transposed(p) for p in (gate_up, down))
        self.num_experts, self.hidden, self.width = gate_up.shape[0], gate_up.shape[1], down.shape[1]
        self.gated, self.up_proj, self.up_bias, self.down_bias = True, None, None, None
        self.first, self.local = self.experts_here(self.num_experts)
        if (self.first, self.local) != (0, self.num_experts):
            gate_up, down = (_slice(p, self.first, self.local) for p in (gate_up, down))
        self.gate_up_proj, self.down_proj = gate_up, down
        self.train(module.training)

    def reset_parameters(self, std: float = 0.02) -> None:
        """Draw the expert weights from N(0, std²) and zero the biases."""
        for weight in (self.gate_up_proj, self.up_proj, self.down_proj):
            if weight is not None:
                nn.init.normal_(weight, std=std)
        for bias in (self.up_bias, self.down_bias):
            if bias is not None:
                nn.init.zeros_(bias)

    # --- compute ---------------------------------------------------------

    def forward(self, x: Tensor, indices: Tensor, weights: Tensor) -> Tensor:
        """Return Σ_k weight·expert(x) per token for x [t, h], top-k indices and weights [t, k]."""
        flat = indices.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // indices.shape[1]
        counts = torch.bincount(flat, minlength=self.num_experts)
        out = self.expert_compute(x[token], counts)
        return self._combine(x, out, weights, order)

    def expert_compute(self, rows: Tensor, counts: Tensor) -> Tensor:
        """Run local expert i on the i-th block of `rows` (blocks of `counts` rows, in expert order).

        One grouped GEMM per projection (hpdsl/torch/modules/grouped.py) where torch's
        runs the operands; otherwise expert by expert.
        """
        up_weight = self.gate_up_proj if self.gated else self.up_proj
        assert up_weight is not None
        if not grouped_applies(rows, up_weight, self.down_proj):
            outputs = [self.expert(i, block) for i, block in enumerate(rows.split(counts.tolist()))]
            return torch.cat(outputs) if outputs else rows.new_zeros(0, self.hidden)
        offsets = offsets_of(counts)
        which = expert_of_rows(counts, rows.shape[0]) if self.up_bias is not None or self.down_bias is not None \
            else None
        hidden = self.grouped_matmul(rows, up_weight, offsets)
        if self.up_bias is not None:
            hidden = hidden + self.up_bias[which]
        out = self.grouped_matmul(self._activated(hidden), self.down_proj, offsets)
        return out if self.down_bias is None else out + self.down_bias[which]

    def grouped_matmul(self, rows: Tensor, weight: Tensor, offsets: Tensor) -> Tensor:
        """Return each expert's rows @ its weight, all experts in one grouped GEMM (a low-precision variant rounds)."""
        return grouped_mm(rows, weight, offsets)

    def expert(self, index: int, x: Tensor) -> Tensor:
        """Return local expert `index`'s MLP output for rows `x`."""
        up_weight = self.gate_up_proj if self.gated else self.up_proj
        assert up_weight is not None
        hidden = self.matmul(x, up_weight[index])
        if self.up_bias is not None:
            hidden = hidden + self.up_bias[index]
        out = self.matmul(self._activated(hidden), self.down_proj[index])
        return out if self.down_bias is None else out + self.down_bias[index]

    def _activated(self, hidden: Tensor) -> Tensor:
        """Return the activation of the first GEMM's output: act(gate)·up when gated, else act(hidden)."""
        if self.gated:
            return fused(functools.partial(_gated, self.unit, self.interleaved), hidden)  # keeps gate and up only
        return activate(self.act, hidden)

    def matmul(self, x: Tensor, weight: Tensor) -> Tensor:
        """Return x @ weight (the GEMM a low-precision variant replaces)."""
        return x @ weight

    @staticmethod
    def _combine(x: Tensor, out: Tensor, weights: Tensor, order: Tensor) -> Tensor:
        """Return Σ_k weight·output per token from the expert outputs `out` (rows in expert order).

        Every token has exactly k rows, so putting the rows back in token order and
        summing over k combines them; the backward keeps the k outputs per token (the
        routing weights' gradient reads them) and the weights, and no scatter source.
        """
        rows = out[torch.argsort(order)].unflatten(0, (-1, weights.shape[-1]))
        return (rows * weights.unsqueeze(-1)).sum(1).to(x.dtype)


class ExpertParallelExperts(GroupedExperts):
    """E/ep experts per rank; tokens travel to their experts and back by all-to-all (the `ep` variant)."""

    def setup_parallel(self, job: JobContext) -> None:
        """Read the ep size and this rank's place on the ep axis from the job."""
        self.ep = job.size("ep")
        self.job: JobMesh | None = job.mesh
        if self.ep > 1 and (self.job is None or self.job.axis_mesh("ep") is None):
            raise BuildError(f"{self.where} needs the job's mesh with an 'ep' axis to split experts over "
                             f"{self.ep} ranks")
        self.ep_rank = self.job.local_rank("ep") if self.job is not None and self.ep > 1 else 0
        self.etp = job.size("etp")
        if self.etp > 1 and (self.job is None or self.job.axis_mesh("etp") is None):
            raise BuildError(f"{self.where} needs the job's mesh with an 'etp' axis to split experts' width over "
                             f"{self.etp} ranks")
        self.etp_rank = self.job.local_rank("etp") if self.job is not None and self.etp > 1 else 0

    def experts_here(self, experts: int) -> tuple[int, int]:
        """Return (first expert, number of experts) of this rank's contiguous share."""
        if experts % self.ep:
            raise BuildError(f"{self.where}: {experts} experts cannot be split evenly over ep={self.ep}")
        local = experts // self.ep
        return self.ep_rank * local, local

    def forward(self, x: Tensor, indices: Tensor, weights: Tensor) -> Tensor:
        """Dispatch tokens to the ranks holding their experts, compute, and bring the results back."""
        if self.ep == 1 and self.etp == 1:
            return super().forward(x, indices, weights)
        flat = indices.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // indices.shape[1]
        counts = torch.bincount(flat, minlength=self.num_experts)
        if self.ep == 1:
            return self._combine(x, self.width_parallel(x[token], counts), weights, order)
        group = self.job.group("ep") if self.job is not None else None
        assert group is not None
        # received[r, j]: rows rank r sends for this rank's local expert j.
        received = exchange_counts(counts, group).view(self.ep, self.local)
        send = counts.view(self.ep, self.local).sum(1).tolist()
        receive = received.sum(1).tolist()
        rows = all_to_all(x[token], send, receive, group)
        regroup = _by_expert(received, self.local)
        computed = self.width_parallel(rows[regroup], received.sum(0))
        back = all_to_all(computed[torch.argsort(regroup)], receive, send, group)
        return self._combine(x, back, weights, order)

    def shard_of(self, name: str, whole: Tensor) -> Tensor:
        """Return this rank's part of parameter `name`'s unsharded value: its experts, its etp slice of the width."""
        mine = whole[self.first:self.first + self.local]
        if self.etp == 1 or name == "down_bias":
            return mine
        if name == "down_proj":
            return mine.chunk(self.etp, dim=1)[self.etp_rank]
        # [gate | up] splits each half; interleaved pairs stay together in a contiguous slice.
        halves = mine.chunk(2, dim=-1) if self.gated and not self.interleaved and name in ("gate_up_proj", "up_bias") \
            else (mine,)
        return torch.cat([half.chunk(self.etp, dim=-1)[self.etp_rank] for half in halves], dim=-1)

    def width_parallel(self, rows: Tensor, counts: Tensor) -> Tensor:
        """Run the local experts on `rows` (blocks of `counts` rows in expert order); under etp, split in width.

        Each etp rank gathers its peers' rows (an all-gather of unequal sizes,
        written as an all-to-all sending its rows to every peer), computes its
        slice of every expert's width on all of them, and sends each peer its
        rows' partial outputs, summed where they arrive (a reduce-scatter).
        """
        if self.etp == 1:
            return self.expert_compute(rows, counts)
        group = self.job.group("etp") if self.job is not None else None
        assert group is not None
        every = [torch.empty_like(counts) for _ in range(self.etp)]
        dist.all_gather(every, counts.contiguous(), group=group)
        each = torch.stack(every)  # [etp, local]: rows each peer holds per local expert
        sizes, mine = each.sum(1).tolist(), [rows.shape[0]] * self.etp
        gathered = all_to_all(rows.repeat(self.etp, 1), mine, sizes, group)
        regroup = _by_expert(each, self.local)
        partial = self.expert_compute(gathered[regroup], each.sum(0))
        pieces = all_to_all(partial[torch.argsort(regroup)], sizes, mine, group)
        return pieces.view(self.etp, rows.shape[0], -1).sum(0)


def _by_expert(counts: Tensor, local: int) -> Tensor:
    """Return the order putting rows grouped by source (blocks of `counts[source, expert]`) in expert order."""
    expert = torch.arange(local, device=counts.device).repeat(counts.shape[0])
    return torch.argsort(torch.repeat_interleave(expert, counts.reshape(-1)), stable=True)


class MXFP8GroupedExperts(ExpertParallelExperts):
    """Experts whose GEMM operands are rounded to MXFP8 (e4m3, one power-of-two scale per 32 values)."""

    block = 32

    def __init__(self, config: ModuleConfig | None = None, *, module: nn.Module | None = None,
                 module_fqn: str = "", context: ContextLike = None) -> None:
        where = f"{module_fqn or '<root>'}: {type(self).__name__}"
        job = job_of(context, module_fqn)
        active = [a for a in ("tp", "cp", "pp") if job.active(a)]
        if active:
            raise BuildError(f"{where} requires TP=CP=PP=1; active {', '.join(active)}")
        if job.size("ep") not in (1, 2):
            raise BuildError(f"{where} supports only EP=1 or EP=2, found ep={job.size('ep')}")
        if config is not None and (not config.gated or config.activation != "silu"
                                   or (config.mlp_bias and config.expert_bias)
                                   or config.glu_alpha or config.glu_limit or config.glu_clamp
                                   or config.glu_interleaved):
            raise BuildError(f"{where} requires a standard bias-free SwiGLU (gated, silu; no glu_alpha, glu_limit, "
                             "glu_clamp or glu_interleaved)")
        super().__init__(config, module=module, module_fqn=module_fqn, context=job)
        if self.hidden % self.block or self.width % self.block:
            raise BuildError(f"{where} needs hidden ({self.hidden}) and expert width ({self.width}) "
                             f"divisible by {self.block}")

    def matmul(self, x: Tensor, weight: Tensor) -> Tensor:
        """Return x @ weight on MXFP8-rounded operands (gradients pass straight through)."""
        return mxfp8_round(x, -1, self.block) @ mxfp8_round(weight, 0, self.block)

    def grouped_matmul(self, rows: Tensor, weight: Tensor, offsets: Tensor) -> Tensor:
        """Return the grouped GEMM on MXFP8-rounded operands (each expert's weight by blocks of its input dim)."""
        return grouped_mm(mxfp8_round(rows, -1, self.block), mxfp8_round(weight, 1, self.block), offsets)


def mxfp8_round(x: Tensor, dim: int, block: int = 32) -> Tensor:
    """Return `x` rounded to MXFP8 along `dim`: e4m3 values, one power-of-two scale per block."""
    moved = x.movedim(dim, -1)
    blocks = moved.reshape(*moved.shape[:-1], moved.shape[-1] // block, block).float()
    amax = blocks.abs().amax(-1, keepdim=True).clamp_min(2.0 ** -126)
    scale = torch.exp2(torch.ceil(torch.log2(amax / 448.0)))
    rounded = (blocks / scale).to(torch.float8_e4m3fn).float() * scale
    rounded = rounded.reshape(moved.shape).movedim(-1, dim).to(x.dtype)
    return x + (rounded - x).detach()


def _gated(unit: Callable[[Tensor, Tensor], Tensor], interleaved: bool, both: Tensor) -> Tensor:
    # [gate | up], or gate and up column by column (glu_interleaved: gpt-oss's packing)
    gate, up = (both[..., ::2], both[..., 1::2]) if interleaved else both.chunk(2, dim=-1)
    return unit(gate, up)


def _transposed(weight: nn.Parameter) -> nn.Parameter:
    return nn.Parameter(weight.detach().transpose(1, 2).contiguous(), requires_grad=weight.requires_grad)


def _slice(weight: nn.Parameter, first: int, count: int) -> nn.Parameter:
    return nn.Parameter(weight.detach()[first:first + count].clone(), requires_grad=weight.requires_grad)


__all__ = ["ExpertParallelExperts", "GroupedExperts", "MXFP8GroupedExperts", "mxfp8_round"]
