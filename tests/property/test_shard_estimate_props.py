"""Estimate = build per rank: an author's family with random layouts and tp shard annotations, bound to any slot.

Hypothesis draws a layout of nn.Linear layers placed colwise, rowwise or
replicated (the biases as tensor parallelism places them: a colwise Linear's
bias colwise, a rowwise one's replicated) and plain replicated tensors, each
with a random condition, writes it as a family, binds it to one slot in turn
(an MTP layer's mtp_proj among them) and builds the model on a fake tp 2 mesh (torch's fake process group, a real
DeviceMesh), which shards it by the layout (hpdsl/torch/layout.py). The
estimator's per-rank parameter bytes, read from the same layout's shard
annotations (hpdsl/cost/formulas/param_shards.py), equal the built rank's
local parameters. The routed-experts slot is left out: expert parallelism,
not tp, shards it (docs/cost-model.md, "Parameters per rank").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from layout_fixture_modules import Condition, Dim
from layout_slots import FLAGS, dims, model_text
from shard_fixture_modules import ShardEntry
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from layout_strategies import condition_text, conditions, dim_text

from hpdsl.api import compile_sources
from hpdsl.cost import bind, estimate
from hpdsl.diagnostics import Source
from hpdsl.model.strategy import Strategy
from hpdsl.torch import build_model
from hpdsl.torch.resolve import DEFAULT_PREFIXES

sys.path.insert(0, str(Path(__file__).parents[1] / "torch"))
from torch_support import process_group  # noqa: E402

TP = 2
PREFIXES = (*DEFAULT_PREFIXES, "shard_fixture_modules.")
SLOT_ROLES = ("embedding", "head", "norm", "attention", "mlp", "shared_experts", "ssm", "mtp_proj")
EVEN: tuple[Dim, ...] = ((("hidden",),), (("ffn_width",),), ((2, "heads"),), (("heads", "head_dim"),), ((2, 3),))
"""Dims tp 2 splits evenly on every drawn model (hidden 16 or 32, ffn_width 48, heads 2 or 4)."""


@st.composite
def entries(draw: st.DrawFn, index: int) -> ShardEntry:
    """Draw one entry: a Linear sharded colwise, rowwise or replicated, or a plain replicated tensor."""
    linear = draw(st.booleans())
    placement = draw(st.sampled_from(("colwise", "rowwise", "replicate"))) if linear else "replicate"
    out_dim = draw(st.sampled_from(EVEN)) if placement == "colwise" else draw(dims)
    in_dim = draw(st.sampled_from(EVEN)) if placement == "rowwise" else draw(dims)
    condition: Condition = draw(conditions(FLAGS, ("heads", "kv_heads", "hidden")))
    return (f"p{index}", linear, out_dim, in_dim, placement, linear and draw(st.booleans()), condition)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[ShardEntry, ...]:
    """Draw 1 to 4 entries p0, p1, ..."""
    return tuple(draw(entries(i)) for i in range(draw(st.integers(1, 4))))


def family_text(spec: tuple[ShardEntry, ...]) -> str:
    """Return the drawn layout as an .hpf family (a Linear's entries are its weight and bias)."""
    lines = []
    for name, linear, out_dim, in_dim, placement, bias, condition in spec:
        shape = f"({dim_text(out_dim)}, {dim_text(in_dim)})"
        if not linear:
            lines.append(f"    {name} {shape} replicate{condition_text(condition)}")
            continue
        lines.append(f"    {name}.weight {shape} {placement}{condition_text(condition)}")
        if bias:
            lines.append(f"    {name}.bias ({dim_text(out_dim)}) {'colwise' if placement == 'colwise' else 'replicate'}"
                         f"{condition_text(condition)}")
    params = ", ".join(entry[0] for entry in spec)
    return ('family drawn {\n  factory "shard_fixture_modules:DrawnSharded"\n'
            f'  variant only "shard_fixture_modules:DrawnSharded" default accepts(spec) params({params})\n'
            "  layout {\n" + "\n".join(lines) + "\n  }\n}\n")


def local_numel(module: torch.nn.Module) -> int:
    """Return the elements this rank holds: a DTensor's local shard, a plain tensor whole."""
    return sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in module.parameters())


@pytest.fixture(scope="module")
def tp_mesh():
    """A fake 2-rank job with one tp axis, this process being rank 1."""
    with process_group(TP, rank=1, fake=True):
        yield init_device_mesh("cpu", (TP,), mesh_dim_names=("tp",))


@settings(max_examples=15, deadline=None)
@given(role=st.sampled_from(SLOT_ROLES), spec=layouts(),
       flags=st.fixed_dictionaries({name: st.booleans() for name in FLAGS}),
       hidden=st.sampled_from((16, 32)), heads=st.sampled_from((2, 4)))
@example(role="mtp_proj", spec=(("p0", True, (("hidden",),), ((2, "hidden"),), "colwise", True, None),),
         flags=dict.fromkeys(FLAGS, False), hidden=16, heads=2)
def test_the_per_rank_estimate_of_a_drawn_sharded_layout_is_the_built_ranks(
        tp_mesh, role: str, spec: tuple[ShardEntry, ...], flags: dict[str, bool], hidden: int, heads: int) -> None:
    registry = compile_sources([Source("drawn.hpf", family_text(spec) + model_text(role, flags, hidden, heads))])
    model = registry.model("drawn_model")
    cost_model = bind(model, registry.profile(model.profile), families=registry.families)
    stage = estimate(cost_model, Strategy(tp=TP, sequence_parallel=True, param_bytes=1)).memory.per_stage[0]
    built = build_model(model, tp_mesh, registry=registry, allowed_prefixes=PREFIXES, selectors={role: {"spec": spec}},
                        include_mtp=True)
    assert stage.params_bytes == local_numel(built)
