"""This machine into a device .hpf, measured as `hpdsl train` runs: `ranks` processes at once, `threads` each.

Every measurement runs in `ranks` gloo processes concurrently (what `hpdsl train
--nproc N` runs, each rank with one torch thread by default, as the trainer sets),
each timed over a window (the sustained time per call, not the best one: a step
of seconds shares the cores with the other ranks and whatever else runs), and the
ranks' results are averaged. Measured with torch on the CPU (fp32): square
matmuls of rising size, a large tensor copy (memory bandwidth), a tiny Linear's
forward and backward (the host time one op costs beyond its arithmetic), torch's
AdamW step over a large tensor (the optimizer's bandwidth), a 32 MiB all-reduce
(the ring's bytes per rank over its time) and 16 to 256 KiB all-reduces (a
message step's latency: their time beyond their bytes). The device's peak is the fastest matmul measured, so
the curve's shares are relative to it.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

import attrs
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import DeviceMesh

from hpdsl.torch.calibrate_attention import HEAD_DIM, HEADS, SEQUENCES, measure_attention
from hpdsl.torch.calibrate_eager import LARGE, TINY, measure_call_overhead, measure_eager_bandwidth
from hpdsl.torch.calibrate_links import (WINDOW_S, collective_seconds, measure_collectives, measure_links,
                                         measure_overlap, sustained_seconds, together)
from hpdsl.torch.process import leave

SIZES = (64, 128, 256, 512, 1024, 2048)
"""The square matmul sizes measured (m = n = k)."""

OPTIMIZER_PARAMS = 2**20
"""Parameters of the tensor the optimizer measurement steps (4 MiB of fp32 weights)."""


@attrs.frozen
class Measured:
    """What calibration measured: FLOP/s per size, bandwidths (bytes/s), op and message times (s), the setting."""

    matmul: tuple[tuple[int, float], ...]
    memory_bandwidth: float
    collective_bandwidth: float
    ranks: int
    threads: int
    op_overhead: float = 0.0
    link_latency: float = 0.0
    optimizer_bandwidth: float = 0.0
    tensor_overhead: float = 0.0
    dtensor_overhead: float = 0.0
    dtensor_op_overhead: float = 0.0
    shard_overhead: float = 0.0
    collectives: tuple[tuple[str, float], ...] = ()  # bytes/s each collective reaches (all_reduce's: ring bytes)
    comm_overlap: float = 1.0
    call_overhead: float = 0.0
    eager_bandwidth: float = 0.0
    attention: tuple[tuple[float, float], ...] = ()  # (size, FLOP/s) of the attention kernel's score work


ROUNDS = 3
"""Rounds over the matmul sizes: each size's time is its median round, so a load that moves during
calibration moves every size alike (the curve's shares stay the machine's, not the moment's)."""


COLD_BYTES = 64 * 2**20
"""Operand bytes each rank's matmuls of one size rotate through: more than a CPU's caches hold."""


def measure_matmul(sizes: Sequence[int] = SIZES, window: float = WINDOW_S) -> tuple[tuple[int, float], ...]:
    """Return (size, FLOP/s) of fp32 square matmuls, each size begun by every rank at once, in ROUNDS rounds.

    Each call multiplies the next of several operand pairs, COLD_BYTES in all, so its operands
    come from memory as a layer's weights and activations do in a step (the layers between two
    uses of one evict them), not from the cache a loop over one pair keeps them in (0.85 of the
    speed on this machine's 2 ranks at 256 to 1,024).
    """
    rounds: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(ROUNDS):
        for n in sizes:
            pairs = itertools.cycle([(torch.randn(n, n), torch.randn(n, n))
                                     for _ in range(max(2, COLD_BYTES // (8 * n * n)))])

            def run() -> None:
                torch.matmul(*next(pairs))

            together()
            rounds[n].append(sustained_seconds(run, window / ROUNDS, least=1))
    return tuple((n, 2.0 * n**3 / sorted(times)[len(times) // 2]) for n, times in rounds.items())


def measure_memory(megabytes: int = 256, window: float = WINDOW_S) -> float:
    """Return bytes/s a tensor copy moves (read and write)."""
    src = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    together()
    return 2.0 * src.numel() * 4 / sustained_seconds(lambda: dst.copy_(src), window)


def measure_op_overhead(window: float = WINDOW_S) -> float:
    """Return the seconds a tiny Linear's forward and backward take: one op's host time, its arithmetic negligible."""
    layer, x = torch.nn.Linear(8, 8), torch.randn(4, 8, requires_grad=True)

    def run() -> None:
        layer(x).backward(torch.ones(4, 8))

    together()
    return sustained_seconds(run, window)


def measure_dtensor_op_overhead(mesh: DeviceMesh, window: float = WINDOW_S) -> float:
    """Return the seconds a tiny colwise-sharded Linear's forward and backward take: one op's host time under tp.

    The linear is sharded over the ranks as the tp plan shards one (ColwiseParallel), its input
    a replicated DTensor leaf, so the op dispatches through DTensor without a collective: the
    host time DTensor adds, beside the message latency link_latency prices.
    """
    from torch.distributed.tensor import Replicate, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    ranks = dist.get_world_size()
    layer = parallelize_module(torch.nn.Linear(8, 8 * ranks), mesh, ColwiseParallel())
    x = distribute_tensor(torch.randn(4, 8), mesh, [Replicate()]).requires_grad_()

    def run() -> None:
        layer(x).sum().backward()

    together()
    return sustained_seconds(run, window)


UNITS = 8
"""FSDP2 units (tiny Linears) the per-unit measurement runs forward and backward."""


def measure_shard_overhead(mesh: DeviceMesh, window: float = WINDOW_S) -> float:
    """Return the seconds one FSDP2 unit adds to a forward and backward beyond its bytes (ZeRO-3's per-unit cost).

    UNITS tiny Linears, each fully_shard-ed over the ranks as hpdsl/torch/parallelize.py shards a
    layer (and the stack as the root), against the same stack unsharded: per unit, the all-gather,
    the reduce-scatter, their copies, FSDP2's hooks and the collectives' latency at a tiny size.
    """
    from torch.distributed.fsdp import FSDPModule, fully_shard

    def stack() -> torch.nn.Sequential:
        torch.manual_seed(0)
        return torch.nn.Sequential(*(torch.nn.Linear(16, 16) for _ in range(UNITS)))

    plain, sharded = stack(), stack()
    for unit in sharded:
        fully_shard(unit, mesh=mesh, reshard_after_forward=False)
    fully_shard(sharded, mesh=mesh, reshard_after_forward=False)
    for module in sharded.modules():  # gloo has neither AVG nor PREMUL_SUM (as parallelize.py sets it)
        if isinstance(module, FSDPModule):
            module.set_force_sum_reduction_for_comms(True)
    x = torch.randn(4, 16)

    def run(model: torch.nn.Module) -> Callable[[], None]:
        return lambda: model(x).sum().backward()

    together()
    alone = sustained_seconds(run(plain), window / 2)
    together()
    return max(collective_seconds(run(sharded), window / 2) - alone, 0.0) / (UNITS + 1)


def measure_optimizer(params: int = OPTIMIZER_PARAMS, window: float = WINDOW_S) -> float:
    """Return the bytes/s torch's AdamW step moves over one fp32 tensor: 2 passes over weights, grads, 2 states."""
    weight = torch.nn.Parameter(torch.randn(params))
    weight.grad = torch.randn(params)
    step = torch.optim.AdamW([weight], lr=1e-3).step
    together()
    return 2.0 * 16 * params / sustained_seconds(step, window)


TENSORS = 64
"""Parameter tensors the per-tensor measurement steps, 16 elements each (their arithmetic negligible)."""


def measure_tensor_overhead(mesh: object | None = None, window: float = WINDOW_S) -> float:
    """Return the seconds a step's per-tensor host work takes per parameter: gradient norm, AdamW, zero_grad.

    What the trainer runs after each backward (hpdsl/torch/optim.py), over TENSORS tiny tensors:
    plain ones, or (`mesh`, a DeviceMesh over the ranks) DTensors sharded on it, as FSDP2 and the
    tp plan hold them (the norm's reduction then is a collective, timed as one).
    """
    from torch.distributed.tensor import Shard, distribute_tensor

    from hpdsl.torch.optim import grad_norm

    ranks = dist.get_world_size()
    params = [torch.nn.Parameter(torch.randn(16 * ranks)) for _ in range(TENSORS)]
    if mesh is not None:
        params = [torch.nn.Parameter(distribute_tensor(p.data, mesh, [Shard(0)])) for p in params]  # type: ignore[arg-type]
    grads = [torch.ones_like(p) for p in params]
    opt = torch.optim.AdamW(params, lr=1e-3)

    def run() -> None:
        for param, grad in zip(params, grads):
            param.grad = grad
        grad_norm(params)
        opt.step()
        opt.zero_grad()

    together()
    seconds = collective_seconds(run, window) if mesh is not None else sustained_seconds(run, window)
    return seconds / TENSORS


def _rank(rank: int, ranks: int, port: int, threads: int, sizes: Sequence[int], window: float, out: object
          ) -> NoReturn:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    try:
        matmul = measure_matmul(sizes, window)
        memory, op = measure_memory(window=window), measure_op_overhead(window)
        optimizer = measure_optimizer(window=window)
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (ranks,))
        tensor = measure_tensor_overhead(None, window)
        dtensor = measure_tensor_overhead(mesh, window)
        bandwidth, latency = measure_links(ranks, window=window)
        dtensor_op, shard = measure_dtensor_op_overhead(mesh, window), measure_shard_overhead(mesh, window)
        collectives, overlap = measure_collectives(ranks, window=window), measure_overlap(window)
        call = measure_call_overhead(window)
        mine = (matmul, memory, op, optimizer, bandwidth, latency, tensor, dtensor, dtensor_op, shard, collectives,
                overlap, call, measure_eager_bandwidth(window), measure_attention(window))
        everyone: list[object] = [None] * ranks
        dist.all_gather_object(everyone, mine)
        if rank == 0:
            out.put(everyone)  # type: ignore[attr-defined]
            out.close()  # type: ignore[attr-defined]
            out.join_thread()  # type: ignore[attr-defined]  # the rows are in the pipe before leave() below
    finally:
        dist.destroy_process_group()
    leave(0)  # hpdsl/torch/process.py: a finished rank must not abort in the interpreter's finalization


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def calibrate(ranks: int = 2, threads: int | None = 1, sizes: Sequence[int] = SIZES,
              window: float = WINDOW_S) -> Measured:
    """Measure this machine on `ranks` concurrent processes of `threads` torch threads (None: torch's default)."""
    threads = threads or torch.get_num_threads()
    queue = mp.get_context("spawn").Queue()
    mp.start_processes(_rank, args=(ranks, _free_port(), threads, tuple(sizes), window, queue), nprocs=ranks,
                       start_method="spawn")
    rows = queue.get(timeout=60)

    def mean(k: int) -> float:
        return sum(float(row[k]) for row in rows) / len(rows)

    matmul = tuple((n, sum(float(row[0][i][1]) for row in rows) / len(rows)) for i, (n, _) in enumerate(rows[0][0]))
    return Measured(matmul, mean(1), mean(4), ranks, threads, op_overhead=mean(2), link_latency=mean(5),
                    optimizer_bandwidth=mean(3), tensor_overhead=mean(6), dtensor_overhead=mean(7),
                    dtensor_op_overhead=mean(8), shard_overhead=mean(9),
                    collectives=tuple((c, sum(float(dict(row[10])[c]) for row in rows) / len(rows))
                                      for c, _ in rows[0][10]),
                    comm_overlap=mean(11), call_overhead=mean(12), eager_bandwidth=mean(13),
                    attention=tuple((s, sum(float(row[14][i][1]) for row in rows) / len(rows))
                                    for i, (s, _) in enumerate(rows[0][14])))


def device_text(name: str, m: Measured, memory_bytes: int) -> str:
    """Return the .hpf text of the device `name` calibration measured."""
    peak = max(flops for _, flops in m.matmul)
    points = "  ".join(f"{n} {max(flops / peak, 1e-4):.4f}" for n, flops in m.matmul)
    shares = "  ".join(f"{s:.1f} {min(max(flops / peak, 1e-4), 1.0):.4f}" for s, flops in m.attention)
    attention = f"\n  curve attention {{ {shares} }}" if m.attention else ""
    eager = (f"\n  call_overhead = {_float(m.call_overhead)}\n  eager_bandwidth = {_float(m.eager_bandwidth)}"
             if m.call_overhead > 0 and m.eager_bandwidth > 0 else "")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"""// Measured by `hpdsl calibrate` on {stamp}: {m.threads} torch threads, {m.ranks} gloo ranks.
// peak: the fastest fp32 square matmul measured, its operands rotated through {COLD_BYTES // 2**20} MiB (from memory,
//   not the cache; the curve's shares are relative to it);
// memory bandwidth: a 256 MiB tensor copy, bytes read and written over its time;
// links: a gloo all-reduce between {m.ranks} processes on this machine (ring bytes per rank), and a
//   16 to 256 KiB all-reduce's time beyond its bytes over its 2(n - 1) ring steps (link_latency, the median);
// op_overhead: a tiny Linear's forward and backward (one op's host time); optimizer_bandwidth: AdamW's step
//   over {OPTIMIZER_PARAMS} fp32 parameters, 2 passes over weights, gradients and two states;
// tensor_overhead, dtensor_overhead: the gradient norm, AdamW's step and zero_grad over {TENSORS} tiny
//   parameters, per parameter: plain tensors, and DTensors sharded over the {m.ranks} ranks;
// dtensor_op_overhead: the tiny Linear colwise-sharded over the ranks (DTensor), its input replicated;
// shard_overhead: {UNITS} tiny Linears fully_shard-ed (FSDP2) over the ranks against the same unsharded, per unit;
// call_overhead: the standard library's Llama layer at hidden 16 on 8 tokens, forward and backward, its time over
//   its aten calls (hpdsl/torch/calibrate_eager.py); eager_bandwidth: an elementwise probe (RMSNorm, SiLU-gated
//   product, cosine) at {LARGE[0]} x {LARGE[1]}, the bytes its calls move over its time beyond their host time
//   (the probe's at {TINY[0]} x {TINY[1]}, per call);
// curve attention: causal SDPA ({HEADS} heads of {HEAD_DIM}, sequences {", ".join(map(str, SEQUENCES))}), forward and
//   backward, its score work as the attention family counts it over its time, as a share of the peak;
// comm_overlap: what a 32 MiB all-reduce beside matmuls of its length saves over the two one after the other,
//   over the shorter (0: the cores that compute also move the bytes);
// cluster {name}_links: the same links, each collective's bandwidth (32 MiB; p2p: a pair's exchange) over the
//   fastest's (its tier's efficiencies). `--cluster` this file to price with them.
// Every number is each rank's sustained time over a {WINDOW_S} s window, all {m.ranks} ranks at once, averaged.
device {name} {{
  memory_bytes = {memory_bytes}
  memory_bandwidth = {_float(m.memory_bandwidth)}
  memory_efficiency = 1.0
  peak_bf16 = {_float(peak)}
  peak_fp32 = {_float(peak)}
  intra_node_bandwidth = {_float(m.collective_bandwidth)}
  inter_node_bandwidth = {_float(m.collective_bandwidth)}
  devices_per_node = {max(os.cpu_count() or 1, m.ranks)}
  op_overhead = {_float(m.op_overhead)}
  link_latency = {_float(m.link_latency)}
  optimizer_bandwidth = {_float(m.optimizer_bandwidth)}
  tensor_overhead = {_float(m.tensor_overhead)}
  dtensor_overhead = {_float(m.dtensor_overhead)}
  dtensor_op_overhead = {_float(m.dtensor_op_overhead)}
  shard_overhead = {_float(m.shard_overhead)}
  comm_overlap = {m.comm_overlap:.4f}{eager}
  source = "hpdsl calibrate, {stamp}"
  curve matmul {{ {points} }}{attention}
}}
{cluster_text(name, m)}"""


def cluster_text(name: str, m: Measured) -> str:
    """Return the .hpf text of the cluster `{name}_links`: one node of the device, its tier as calibration measured it."""
    rates = {"all_reduce": m.collective_bandwidth, **dict(m.collectives)}
    fastest = max(rates.values())
    shares = "\n".join(f"    {c} = {min(max(bw / fastest, 1e-4), 1.0):.4f}" for c, bw in rates.items())
    return f"""
cluster {name}_links {{
  device = "{name}"
  devices_per_node = {max(os.cpu_count() or 1, m.ranks)}
  source = "hpdsl calibrate: gloo between {m.ranks} processes on this machine"
  tier loopback {{
    scope = "node"
    bandwidth = {_float(fastest)}
    latency = {_float(max(m.link_latency, 1e-9))}
{shares}
  }}
}}
"""


def _float(value: float) -> str:
    mantissa, _, exponent = f"{value:.4e}".partition("e")
    return f"{mantissa}e{int(exponent):+d}"
