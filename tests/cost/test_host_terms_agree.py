"""The calibrated host and link facts price the same in the search's grid, its shared work and the scalar estimate.

A device that states every host fact `hpdsl calibrate` writes (op and DTensor op overheads,
per-tensor and per-FSDP2-unit costs, comm_overlap below 1) must leave the three pricing paths
bitwise equal, as the shipped devices do (tests/cost/test_search_work.py).
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import attrs
import numpy as np
from cost_builders import device_text, example, valid_with_codes
from hypothesis import given, settings
from hypothesis import strategies as st

from hpdsl.cost.estimate import estimate, grid_estimate
from hpdsl.cost.price.grid import price_fit
from hpdsl.cost.price.prepare import Prepared, prepare
from hpdsl.cost.sweep.space import search_space
from hpdsl.ir.nodes import evolve
from hpdsl.model.strategy import Strategy

FOLDER = Path(tempfile.mkdtemp(prefix="hpdsl-host-terms-"))
"""Each drawn device gets its own file: a machine key is its path, and the catalog holds what it compiled."""


def _device(op: float, dtensor_op: float, tensor: float, shard: float, overlap: float, call: float = 0.0) -> str:
    path = FOLDER / f"host_{uuid.uuid4().hex}.hpf"
    extra = (f"op_overhead = {op:.3e} dtensor_op_overhead = {dtensor_op:.3e} tensor_overhead = {tensor:.3e} "
             f"shard_overhead = {shard:.3e} comm_overlap = {overlap}")
    if call:  # eager execution: the families' eager terms priced (docs/cost-model.md, "Eager execution")
        extra += f" call_overhead = {call:.3e} eager_bandwidth = 2.0e+10"
    path.write_text(device_text("host", "drawn host facts", extra=extra), encoding="utf-8")
    return str(path)


SECONDS = st.floats(1e-6, 1e-2)
LLAMA = prepare(example("llama3_8b"))


def _backend(**facts: bool) -> Prepared:
    """Return Llama-3-8B prepared under run facts changed by `facts` (hpdsl train's backend states them)."""
    cost_model = example("llama3_8b")
    profile = cost_model.profile
    return prepare(attrs.evolve(cost_model, profile=attrs.evolve(profile, run=evolve(profile.run, **facts))))


BACKENDS = {"megatron": LLAMA, "summed": _backend(fused_grad_accumulation=False),
            "summed, deferred": _backend(fused_grad_accumulation=False, deferred_grad_accumulation=True)}
"""Gradient accumulation as Megatron fuses it, and as autograd sums it every micro-batch, synced or deferred."""


@settings(max_examples=25, deadline=None)
@given(op=SECONDS, dtensor_op=SECONDS, tensor=SECONDS, shard=SECONDS, overlap=st.sampled_from((0.0, 0.3, 1.0)),
       tp=st.sampled_from((1, 2, 4)), dp=st.sampled_from((1, 2, 4)), pp=st.sampled_from((1, 2)),
       zero=st.sampled_from(("none", "os", "os+grad", "os+grad+params")), micro=st.sampled_from((1, 2)),
       call=st.sampled_from((0.0, 1e-5)), recompute=st.sampled_from(("none", "selective", "full")),
       backend=st.sampled_from(sorted(BACKENDS)))
def test_the_grid_prices_the_host_facts_as_the_scalar_estimate(op: float, dtensor_op: float, tensor: float,
                                                                shard: float, overlap: float, tp: int, dp: int,
                                                                pp: int, zero: str, micro: int, call: float,
                                                                recompute: str, backend: str) -> None:
    device = _device(op, dtensor_op, tensor, shard, overlap, call)
    strategy = Strategy(tp=tp, dp=dp, pp=pp, zero=zero, global_batch=dp * pp * micro, device=device,  # type: ignore[arg-type]
                        recompute=recompute)  # type: ignore[arg-type]
    model = BACKENDS[backend]
    scalar = estimate(model, strategy)
    assert grid_estimate(model, strategy).step_time_s == scalar.step_time_s
    if zero == "os+grad+params" and dp > 1:  # each FSDP2 unit: the rank's layers and its root, every micro-batch
        plain = _device(op, dtensor_op, tensor, 0.0, overlap, call)
        gap = scalar.step_time_s - estimate(model, strategy.with_(device=plain)).step_time_s
        assert gap > 0


def test_the_search_shares_work_on_a_calibrated_device() -> None:
    device = _device(2e-4, 1e-3, 1e-4, 4e-3, 0.0)
    space = search_space(LLAMA, 16, global_batch=64, seq_len=2048, vpp=(1, 2), base=Strategy().with_(device=device))
    valid, codes = valid_with_codes(space, LLAMA.columns)
    assert len(np.unique(codes)) < len(valid)
    alone, shared = price_fit(LLAMA, valid), price_fit(LLAMA, valid, codes)
    assert np.array_equal(alone[0], shared[0], equal_nan=True)
    assert np.array_equal(alone[1], shared[1], equal_nan=True)
