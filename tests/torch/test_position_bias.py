"""T5's relative-position bias tables: the position_bias slot, built and priced from relative_position_bias's layout."""

from __future__ import annotations

from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch_support import process_group

from hpdsl.cost import bind, estimate
from hpdsl.model.strategy import Strategy
from hpdsl.torch import build_model, collect_family_modules
from hpdsl.torch.modules import RelativePositionBias


def test_each_tower_builds_its_table_through_the_slots_family(examples_registry) -> None:
    built = build_model("t5_small", registry=examples_registry)
    tables = {b.info.module_fqn: b.module for b in collect_family_modules(built)
              if b.info.resolved.family.name == "relative_position_bias"}
    assert set(tables) == {"encoder.position_bias", "decoder.position_bias"}
    encoder, decoder = tables["encoder.position_bias"], tables["decoder.position_bias"]
    assert isinstance(encoder, RelativePositionBias) and built.encoder.position_bias is encoder
    assert encoder.bidirectional and not decoder.bidirectional  # examples/t5_small.hpf: 32 buckets, 8 heads
    assert tuple(encoder.embedding.weight.shape) == tuple(decoder.embedding.weight.shape) == (32, 8)


def test_at_tp_2_the_estimate_per_rank_is_the_built_ranks_tables_whole(examples_registry) -> None:
    model = examples_registry.model("t5_small")
    cost_model = bind(model, examples_registry.profile(model.profile), families=examples_registry.families)
    stage = estimate(cost_model, Strategy(tp=2, param_bytes=1)).memory.per_stage[0]
    with process_group(2, rank=0, fake=True):
        built = build_model(model, init_device_mesh("cpu", (2,), mesh_dim_names=("tp",)), registry=examples_registry)
        local = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in built.parameters())
        assert not isinstance(built.encoder.position_bias.embedding.weight, DTensor)  # the layout replicates it
    assert stage.params_bytes == local
