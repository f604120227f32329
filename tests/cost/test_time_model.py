"""The device time model as the default, `--mfu X` as the override, and each term it prices (issue 22)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from cost_builders import device_text

from hpdsl.api import bind_model
from hpdsl.cost.estimate import estimate, grid_estimate
from hpdsl.ir.nodes import evolve
from hpdsl.model.strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "examples" / "llama3_8b.hpf"


@pytest.fixture(scope="module")
def llama() -> object:
    """Return Llama-3-8B bound to its profile."""
    return bind_model([LLAMA], "llama3_8b")


def _hpdsl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, env=dict(os.environ))


def test_the_library_prices_with_the_device_by_default(llama: object) -> None:
    strategy = Strategy(tp=2, dp=4, global_batch=32)
    default = estimate(llama, strategy)  # type: ignore[arg-type]
    assert strategy.mfu == 0.0
    assert default.step_time_s == estimate(llama, strategy.with_(mfu=0.0)).step_time_s  # type: ignore[arg-type]
    assert default.step_time_s != estimate(llama, strategy.with_(mfu=0.4)).step_time_s  # type: ignore[arg-type]
    assert default.to_json()["machine"]["time_model"] == "device"


def test_an_explicit_mfu_keeps_the_constant_efficiency_model(llama: object) -> None:
    strategy = Strategy(tp=2, dp=4, global_batch=32, mfu=0.4)
    priced = estimate(llama, strategy)  # type: ignore[arg-type]
    # Every executed FLOP of the busiest device at 0.4 of the H100's 989 TFLOP/s bounds the step from below.
    assert priced.step_time_s >= priced.flops.per_device / (0.4 * 9.89e14)
    machine = priced.to_json()["machine"]
    assert machine["time_model"] == "mfu" and machine["assumed_mfu"] == 0.4


def test_the_cli_says_which_time_model_it_assumed() -> None:
    flags = ("estimate", str(LLAMA), "--tp", "2", "--dp", "4", "--global-batch", "32")
    default, override = _hpdsl(*flags, "--json"), _hpdsl(*flags, "--mfu", "0.4", "--json")
    assert default.returncode == 0 and override.returncode == 0, default.stderr + override.stderr
    first, second = json.loads(default.stdout), json.loads(override.stdout)
    assert first["machine"]["time_model"] == "device" and first["machine"]["assumed_mfu"] is None
    assert second["machine"]["time_model"] == "mfu" and second["step_time_s"] != first["step_time_s"]
    text = _hpdsl(*flags).stdout
    assert "the device time model" in text and "where the step goes: steady" in text
    assert "after the last backward" in text and "(optimizer step" in text


def _cluster(path: Path, *, node: str = "", network: str = "", per_node: int = 8, latency: float = 1e-6) -> str:
    """Write a two-tier cluster of H100s to `path` (extra tier keys in `node`, `network`); return its key."""
    path.write_text(f"""cluster rack {{
  device = "h100_sxm"
  devices_per_node = {per_node}
  source = "a test rack"
  tier fast {{ scope = "node" bandwidth = 4.0e+11 latency = {latency:e} {node} }}
  tier slow {{ scope = "network" bandwidth = 4.0e+10 latency = {latency:e} {network} }}
}}
""")
    return f"@{path}"


def _parts(llama: object, strategy: Strategy) -> tuple[dict[str, float], dict[str, float]]:
    priced = estimate(llama, strategy)  # type: ignore[arg-type]
    return priced.breakdown, priced.communication


def test_tp_runs_at_all_gather_and_reduce_scatter_under_sp_and_all_reduce_without(llama: object,
                                                                                   tmp_path: Path) -> None:
    rack = _cluster(tmp_path / "rack.hpf", node="all_reduce = 0.9 all_gather = 0.5 reduce_scatter = 0.25",
                    latency=1e-30)
    for sp, share in ((True, 2 / (1 / 0.5 + 1 / 0.25)), (False, 0.9)):
        parts, moved = _parts(llama, Strategy(tp=8, sequence_parallel=sp, device=rack))
        assert parts["tp_s"] == pytest.approx(moved["tp"] / (4.0e11 * share), rel=1e-12)


def test_the_moe_dispatch_is_an_all_to_all_on_the_ep_axis_tier(tmp_path: Path) -> None:
    mixtral = bind_model([ROOT / "examples" / "mixtral_8x7b.hpf"], "mixtral_8x7b")
    rack = _cluster(tmp_path / "rack.hpf", per_node=4, network="all_reduce = 0.9 all_to_all = 0.3", latency=1e-30)
    # ep 8 spans two nodes of 4: the dispatch and combine cross the network tier at its all-to-all share.
    priced = estimate(mixtral, Strategy(dp=8, ep=8, device=rack))
    assert priced.breakdown["ep_s"] == pytest.approx(priced.communication["ep"] / (4.0e10 * 0.3), rel=1e-12)


def test_pipeline_sends_run_at_the_p2p_share(llama: object, tmp_path: Path) -> None:
    rack = _cluster(tmp_path / "rack.hpf", node="all_reduce = 0.9 p2p = 0.4", latency=1e-30)
    parts, moved = _parts(llama, Strategy(pp=2, global_batch=8, device=rack))
    assert parts["pp_s"] == pytest.approx(moved["pp"] / (4.0e11 * 0.4), rel=1e-12)


def test_every_collective_step_waits_the_tier_latency(llama: object, tmp_path: Path) -> None:
    # tp 2 without sp, one device group, one micro-batch: 32 layers x 4 gathers + the embedding's and the
    # output's = 130 gathers a pass, each one ring step (n - 1), forward and backward: 260 steps.
    slow, fast = (_cluster(tmp_path / f"{name}.hpf", latency=lat) for name, lat in (("slow", 1e-3), ("fast", 1e-9)))
    one = Strategy(tp=2, sequence_parallel=False, global_batch=1)
    gap = estimate(llama, one.with_(device=slow)).step_time_s - estimate(llama, one.with_(device=fast)).step_time_s
    assert gap == pytest.approx(260 * (1e-3 - 1e-9), rel=1e-9)


def test_a_tree_all_reduce_takes_log_steps(llama: object, tmp_path: Path) -> None:
    # tp 8 without sp: a ring all-reduce takes 2 x 7 steps, a tree 2 x ceil(log2 8) = 6; 130 all-reduce halves
    # a pass, forward and backward.
    ring = _cluster(tmp_path / "ring.hpf", latency=1e-3)
    tree = _cluster(tmp_path / "tree.hpf", node='algorithm = "tree"', latency=1e-3)
    one = Strategy(tp=8, sequence_parallel=False, global_batch=1)
    gap = estimate(llama, one.with_(device=ring)).step_time_s - estimate(llama, one.with_(device=tree)).step_time_s
    assert gap == pytest.approx(260 * (7 - 3) * 1e-3, rel=1e-9)
    assert grid_estimate(llama, one.with_(device=tree)).step_time_s == estimate(llama, one.with_(device=tree)).step_time_s


def test_the_optimizer_step_reads_and_writes_the_ranks_shard_at_bandwidth(llama: object) -> None:
    # What follows the last backward is the dp reduction (none on one device; ZeRO-1 over 8 within the
    # node: its bytes at 450 GB/s) and the optimizer step, 2 passes over the rank's weights, gradients and
    # (sharded) states at the H100's 3.35 TB/s x 0.9.
    for zero, dp in (("none", 1), ("os", 8)):
        priced = estimate(llama, Strategy(dp=dp, zero=zero, global_batch=dp))  # type: ignore[arg-type]
        stage = priced.memory.per_stage[0]
        static = stage.params_bytes + stage.grads_bytes + stage.optimizer_bytes
        expected = priced.communication["dp"] / 4.5e11 + 2 * static / (3.35e12 * 0.9)
        assert priced.breakdown["after_backward_s"] == pytest.approx(expected, rel=1e-12)
        assert priced.breakdown["optimizer_s"] == pytest.approx(2 * static / (3.35e12 * 0.9), rel=1e-12)


def _device(path: Path, extra: str = "") -> str:
    """Write the H100 as a device file with `extra` keys (host facts) to `path`; return its key."""
    path.write_text(device_text("h100_host", "the H100 of devices/h100.hpf, host facts added for a test", extra=extra))
    return str(path)


def test_each_op_of_a_column_costs_the_devices_op_overhead(llama: object, tmp_path: Path) -> None:
    # One device, one micro-batch: 32 layers of 14 ops (the default profile's vector without its 4 gathers:
    # attMM 4, attBMM 2, ffMM 3, softmax 1, normOp 2, headCast 1, ffAct 1), the embedding's lookup and the
    # output's norm, matmul and loss: 451 ops, each 1 ms of host time forward and backward.
    plain, host = _device(tmp_path / "plain.hpf"), _device(tmp_path / "host.hpf", "op_overhead = 1.0e-3")
    one = Strategy(global_batch=1)
    gap = estimate(llama, one.with_(device=host)).step_time_s - estimate(llama, one.with_(device=plain)).step_time_s
    assert gap == pytest.approx((32 * 14 + 1 + 3) * 1e-3, rel=1e-9)
    parts = estimate(llama, one.with_(device=host)).breakdown  # type: ignore[arg-type]
    assert parts["host_s"] == pytest.approx((32 * 14 + 1 + 3) * 1e-3, rel=1e-12) and parts["host_s"] < parts["compute_s"]
    assert "host_s" not in estimate(llama, one.with_(device=plain)).breakdown  # type: ignore[arg-type]
    # Under tp the gathers dispatch too (4 a layer, one each for the embedding and the output), and a
    # full recompute dispatches each forward again, a third of its op's time.
    tp = Strategy(tp=2, sequence_parallel=False, global_batch=1)
    gap_tp = estimate(llama, tp.with_(device=host)).step_time_s - estimate(llama, tp.with_(device=plain)).step_time_s
    assert gap_tp == pytest.approx((32 * 18 + 2 + 4) * 1e-3, rel=1e-9)
    full = one.with_(recompute="full")
    gap_full = (estimate(llama, full.with_(device=host)).step_time_s
                - estimate(llama, full.with_(device=plain)).step_time_s)
    assert gap_full == pytest.approx((32 * 14 * 4 / 3 + 1 + 3) * 1e-3, rel=1e-9)
    assert grid_estimate(llama, tp.with_(device=host)).step_time_s == estimate(llama, tp.with_(device=host)).step_time_s
    assert estimate(llama, one.with_(device=host)).to_json()["machine"]["op_overhead"] == 1e-3


def test_a_device_link_latency_prices_each_message_step_without_a_cluster(llama: object, tmp_path: Path) -> None:
    # As test_every_collective_step_waits_the_tier_latency: 260 ring steps of tp 2 without sp, one
    # micro-batch, now at the device's own link_latency (no cluster).
    plain, slow = _device(tmp_path / "plain.hpf"), _device(tmp_path / "slow.hpf", "link_latency = 1.0e-3")
    one = Strategy(tp=2, sequence_parallel=False, global_batch=1)
    gap = estimate(llama, one.with_(device=slow)).step_time_s - estimate(llama, one.with_(device=plain)).step_time_s
    assert gap == pytest.approx(260 * 1e-3, rel=1e-9)
    assert estimate(llama, one.with_(device=slow)).to_json()["machine"]["link_latency"] == 1e-3


def test_the_optimizer_step_runs_at_the_devices_optimizer_bandwidth(llama: object, tmp_path: Path) -> None:
    slow = _device(tmp_path / "slow.hpf", "optimizer_bandwidth = 1.0e+11")
    priced = estimate(llama, Strategy(global_batch=1, device=slow))  # type: ignore[arg-type]
    stage = priced.memory.per_stage[0]
    static = stage.params_bytes + stage.grads_bytes + stage.optimizer_bytes
    assert priced.breakdown["optimizer_s"] == pytest.approx(2 * static / 1.0e11, rel=1e-12)
    assert priced.breakdown["after_backward_s"] == pytest.approx(2 * static / 1.0e11, rel=1e-12)


def test_each_parameter_tensor_costs_the_devices_tensor_overhead(llama: object, tmp_path: Path) -> None:
    # After the last backward the trainer's gradient norm, AdamW and zero_grad visit each parameter tensor:
    # 32 layers of 9 (q, k, v, o, gate, up, down and 2 norms), the embedding and the output's norm and head:
    # 291 tensors at 1 ms each on one device; DTensors (tp or dp > 1) at the dtensor_overhead, 3 ms.
    plain = _device(tmp_path / "plain.hpf")
    slow = _device(tmp_path / "slow.hpf", "tensor_overhead = 1.0e-3 dtensor_overhead = 3.0e-3")
    for strategy, seconds in ((Strategy(global_batch=1), 1e-3), (Strategy(tp=2, global_batch=1), 3e-3),
                              (Strategy(dp=2, zero="os+grad+params", global_batch=2), 3e-3)):
        priced = estimate(llama, strategy.with_(device=slow))  # type: ignore[arg-type]
        gap = priced.step_time_s - estimate(llama, strategy.with_(device=plain)).step_time_s  # type: ignore[arg-type]
        assert gap == pytest.approx(291 * seconds, rel=1e-9)
        assert priced.breakdown["optimizer_tensors_s"] == pytest.approx(291 * seconds, rel=1e-9)
        assert grid_estimate(llama, strategy.with_(device=slow)).step_time_s == priced.step_time_s
    # pp 2: each rank walks only its own tensors; the step waits on the rank with more (16 layers and the output).
    pp = Strategy(pp=2, global_batch=2)
    gap = estimate(llama, pp.with_(device=slow)).step_time_s - estimate(llama, pp.with_(device=plain)).step_time_s
    assert gap == pytest.approx((16 * 9 + 2) * 1e-3, rel=1e-9)
    assert "optimizer_tensors_s" not in estimate(llama, Strategy(global_batch=1, device=plain)).breakdown
    json_machine = estimate(llama, Strategy(tp=2, device=slow)).to_json()["machine"]
    assert json_machine["tensor_overhead"] == 1e-3 and json_machine["dtensor_overhead"] == 3e-3


def test_without_a_dtensor_overhead_dtensors_cost_the_tensor_overhead(llama: object, tmp_path: Path) -> None:
    plain, slow = _device(tmp_path / "plain.hpf"), _device(tmp_path / "slow.hpf", "tensor_overhead = 1.0e-3")
    tp = Strategy(tp=2, global_batch=1)
    gap = estimate(llama, tp.with_(device=slow)).step_time_s - estimate(llama, tp.with_(device=plain)).step_time_s
    assert gap == pytest.approx(291 * 1e-3, rel=1e-9)


def test_under_tp_each_op_costs_the_devices_dtensor_op_overhead(llama: object, tmp_path: Path) -> None:
    # As the test above: 32 layers of 18 ops under tp (their 4 gathers too), 2 for the embedding and 4 for the
    # output, each now at the DTensor op's 5 ms (the tp plan's linears dispatch through DTensor); 1 ms at tp 1.
    plain = _device(tmp_path / "plain.hpf")
    host = _device(tmp_path / "host.hpf", "op_overhead = 1.0e-3 dtensor_op_overhead = 5.0e-3")
    tp, one = Strategy(tp=2, sequence_parallel=False, global_batch=1), Strategy(global_batch=1)
    gap_tp = estimate(llama, tp.with_(device=host)).step_time_s - estimate(llama, tp.with_(device=plain)).step_time_s
    assert gap_tp == pytest.approx((32 * 18 + 2 + 4) * 5e-3, rel=1e-9)
    gap = estimate(llama, one.with_(device=host)).step_time_s - estimate(llama, one.with_(device=plain)).step_time_s
    assert gap == pytest.approx((32 * 14 + 1 + 3) * 1e-3, rel=1e-9)
    assert grid_estimate(llama, tp.with_(device=host)).step_time_s == estimate(llama, tp.with_(device=host)).step_time_s
    assert estimate(llama, tp.with_(device=host)).to_json()["machine"]["dtensor_op_overhead"] == 5e-3


def test_each_fsdp2_unit_costs_the_devices_shard_overhead_every_micro_batch(llama: object, tmp_path: Path) -> None:
    # ZeRO-3 over dp 2: 32 layers and the root, each an FSDP2 unit (hpdsl/torch/parallelize.py), 2 ms each
    # per micro-batch; nothing without ZeRO-3's sharding or without a second data-parallel rank.
    plain, host = _device(tmp_path / "plain.hpf"), _device(tmp_path / "host.hpf", "shard_overhead = 2.0e-3")

    def gap(strategy: Strategy) -> float:
        return (estimate(llama, strategy.with_(device=host)).step_time_s  # type: ignore[arg-type]
                - estimate(llama, strategy.with_(device=plain)).step_time_s)  # type: ignore[arg-type]

    zero3 = Strategy(dp=2, zero="os+grad+params", global_batch=2)
    assert gap(zero3) == pytest.approx(33 * 2e-3, rel=1e-9)
    assert gap(zero3.with_(global_batch=6)) == pytest.approx(3 * 33 * 2e-3, rel=1e-9)  # 3 micro-batches
    assert gap(Strategy(dp=2, zero="os+grad", global_batch=2)) == 0.0
    assert gap(Strategy(zero="os+grad+params", global_batch=1)) == 0.0
    assert grid_estimate(llama, zero3.with_(device=host)).step_time_s == estimate(llama, zero3.with_(device=host)).step_time_s
    assert estimate(llama, zero3.with_(device=host)).to_json()["machine"]["shard_overhead"] == 2e-3


def test_comm_overlap_is_the_share_of_the_gradient_traffic_hidden_behind_compute(llama: object, tmp_path: Path) -> None:
    # ZeRO-3 over 64 ranks reduce-scatters and gathers every micro-batch behind its compute: a device
    # that hides none of it (a CPU's cores move the bytes) pays it all, one that hides half pays between.
    devices = {share: _device(tmp_path / f"o{share}.hpf", f"comm_overlap = {share}") for share in (0.0, 0.5, 1.0)}
    zero3 = Strategy(dp=64, zero="os+grad+params", global_batch=256)
    step = {share: estimate(llama, zero3.with_(device=d)).step_time_s for share, d in devices.items()}  # type: ignore[arg-type]
    assert step[0.0] > step[1.0]
    assert step[0.5] == pytest.approx((step[0.0] + step[1.0]) / 2, rel=1e-9)
    assert step[1.0] == estimate(llama, zero3.with_(device=_device(tmp_path / "p.hpf"))).step_time_s  # type: ignore[arg-type]
    assert grid_estimate(llama, zero3.with_(device=devices[0.0])).step_time_s == step[0.0]  # type: ignore[arg-type]


def test_comm_overlap_may_be_zero_but_not_below() -> None:
    from hpdsl.api import compile_sources
    from hpdsl.diagnostics import Source
    from hpdsl.errors import SpecError

    text = device_text("cpuish", "a test", extra="comm_overlap = -0.5")
    with pytest.raises(SpecError) as caught:
        compile_sources([Source("cpuish.hpf", text)], stdlib=False)
    assert "'comm_overlap' is -0.5, expected from 0 and at most 1" in str(caught.value.diagnostics)
    unit = compile_sources([Source("cpuish.hpf", device_text("cpuish", "a test", extra="comm_overlap = 0"))],
                           stdlib=False)
    assert unit.devices["cpuish"].comm_overlap == 0.0


def _summed(cost_model: object) -> object:
    """Return `cost_model` with its profile's gradients summed per micro-batch (hpdsl train's backend)."""
    profile = cost_model.profile  # type: ignore[attr-defined]
    return attrs.evolve(cost_model, profile=attrs.evolve(profile, run=evolve(profile.run,
                                                                                fused_grad_accumulation=False)))


def test_each_micro_batch_after_the_first_sums_its_gradients_where_the_backend_does_not_fuse_them(
        llama: object, tmp_path: Path) -> None:
    # Megatron's weight-gradient matmuls add into the accumulated gradients (the default: none priced);
    # autograd adds each micro-batch after the first into the held ones: 3 passes over the rank's gradient
    # bytes at the optimizer bandwidth, and one call per parameter tensor (291: 32 layers of 9, the
    # embedding, the final norm and head) at the device's call_overhead.
    summed, device = _summed(llama), _device(tmp_path / "eager.hpf", "optimizer_bandwidth = 1.0e+11 "
                                                                      "call_overhead = 1.0e-3")
    for strategy in (Strategy(global_batch=4, device=device),  # 4 micro-batches on one device: 3 sums
                     Strategy(dp=2, zero="os+grad+params", global_batch=8, device=device)):  # FSDP2's shards
        fused, unfused = estimate(llama, strategy), estimate(summed, strategy)  # type: ignore[arg-type]
        grads = unfused.memory.per_stage[0].grads_bytes
        sums = 3 * (3 * grads / 1.0e11 + 291 * 1e-3)
        assert unfused.step_time_s - fused.step_time_s == pytest.approx(sums, rel=1e-9)
        assert unfused.breakdown["grad_sum_s"] == pytest.approx(sums, rel=1e-9)
        assert "grad_sum_s" not in fused.breakdown
        assert grid_estimate(summed, strategy).step_time_s == unfused.step_time_s  # type: ignore[arg-type]
    one = Strategy(global_batch=1, device=device)  # one micro-batch: nothing to add into
    assert estimate(summed, one).step_time_s == estimate(llama, one).step_time_s  # type: ignore[arg-type]


def test_deferred_accumulation_sums_the_unsharded_gradients(llama: object, tmp_path: Path) -> None:
    # With the sync deferred, every micro-batch's gradients add up unsharded until the one reduce-scatter:
    # the sums run over the rank's whole gradients, not its ZeRO-3 shard (2 micro-batches: one sum).
    summed = _summed(llama)
    profile = summed.profile  # type: ignore[attr-defined]
    deferred = attrs.evolve(summed, profile=attrs.evolve(profile, run=evolve(profile.run,
                                                                            deferred_grad_accumulation=True)))
    device = _device(tmp_path / "slow.hpf", "optimizer_bandwidth = 1.0e+11")
    strategy = Strategy(dp=2, zero="os+grad+params", global_batch=4, device=device)
    shard, whole = estimate(summed, strategy), estimate(deferred, strategy)  # type: ignore[arg-type]
    grads = shard.memory.per_stage[0].grads_bytes
    assert shard.breakdown["grad_sum_s"] == pytest.approx(3 * grads / 1.0e11, rel=1e-9)
    assert whole.breakdown["grad_sum_s"] == pytest.approx(2 * 3 * grads / 1.0e11, rel=1e-9)  # dp 2: twice the shard
    assert grid_estimate(deferred, strategy).step_time_s == whole.step_time_s  # type: ignore[arg-type]
