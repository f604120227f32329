"""This machine into a device .hpf, measured as `hpdsl train` runs: `ranks` processes at once, `threads` each.

Every measurement runs in `ranks` gloo processes concurrently (what `hpdsl train
--nproc N` runs, each rank with one torch thread by default, as the trainer sets),
each timed over a window (the sustained time per call, not the best one: a step
of seconds shares the cores with the other ranks and whatever else runs), and the
ranks' results are averaged. Measured with torch on the CPU (fp32): square
matmuls of rising size, a large tensor copy (memory bandwidth), a tiny Linear's
forward and backward (the host time one op costs beyond its arithmetic), torch's
AdamW step over a large tensor (the optimizer's bandwidth), a 32 MiB all-reduce
(the ring's bytes per rank over its time) and a one-element all-reduce (a
message step's latency). The device's peak is the fastest matmul measured, so
the curve's shares are relative to it.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable, Sequence

import attrs
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = (64, 128, 256, 512, 1024, 2048)
"""The square matmul sizes measured (m = n = k)."""

WINDOW_S = 0.25
"""Seconds each measurement runs for (at least MIN_CALLS calls): its time per call is the window's mean."""

MIN_CALLS = 3

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


def sustained_seconds(run: Callable[[], object], window: float = WINDOW_S, least: int = MIN_CALLS) -> float:
    """Return the mean wall time per call of `run` over a window of `window` s and at least `least` calls."""
    run()  # warm-up: allocation, first-call dispatch
    calls, start = 0, time.perf_counter()
    while calls < least or time.perf_counter() - start < window:
        run()
        calls += 1
    return (time.perf_counter() - start) / calls


def collective_seconds(run: Callable[[], object], window: float = WINDOW_S, least: int = MIN_CALLS) -> float:
    """Return the mean wall time per call of collective `run` over about `window` s, every rank calling it as often.

    Each rank times `least` calls; the ranks agree (the largest) on how many calls fill the window,
    so none waits on a collective the others never start.
    """
    run()
    start = time.perf_counter()
    for _ in range(least):
        run()
    per_call = (time.perf_counter() - start) / least
    count = torch.tensor([max(least, math.ceil(window / max(per_call, 1e-9)))])
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    calls, start = int(count.item()), time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls


ROUNDS = 3
"""Rounds over the matmul sizes: each size's time is its median round, so a load that moves during
calibration moves every size alike (the curve's shares stay the machine's, not the moment's)."""


def measure_matmul(sizes: Sequence[int] = SIZES, window: float = WINDOW_S) -> tuple[tuple[int, float], ...]:
    """Return (size, FLOP/s) of fp32 square matmuls, each size begun by every rank at once, in ROUNDS rounds."""
    inputs = {n: (torch.randn(n, n), torch.randn(n, n)) for n in sizes}
    rounds: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(ROUNDS):
        for n, (a, b) in inputs.items():
            _together()
            rounds[n].append(sustained_seconds(lambda: torch.matmul(a, b), window / ROUNDS, least=1))
    return tuple((n, 2.0 * n**3 / sorted(times)[len(times) // 2]) for n, times in rounds.items())


def measure_memory(megabytes: int = 256, window: float = WINDOW_S) -> float:
    """Return bytes/s a tensor copy moves (read and write)."""
    src = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    _together()
    return 2.0 * src.numel() * 4 / sustained_seconds(lambda: dst.copy_(src), window)


def measure_op_overhead(window: float = WINDOW_S) -> float:
    """Return the seconds a tiny Linear's forward and backward take: one op's host time, its arithmetic negligible."""
    layer, x = torch.nn.Linear(8, 8), torch.randn(4, 8, requires_grad=True)

    def run() -> None:
        layer(x).backward(torch.ones(4, 8))

    _together()
    return sustained_seconds(run, window)


def measure_optimizer(params: int = OPTIMIZER_PARAMS, window: float = WINDOW_S) -> float:
    """Return the bytes/s torch's AdamW step moves over one fp32 tensor: 2 passes over weights, grads, 2 states."""
    weight = torch.nn.Parameter(torch.randn(params))
    weight.grad = torch.randn(params)
    step = torch.optim.AdamW([weight], lr=1e-3).step
    _together()
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

    _together()
    seconds = collective_seconds(run, window) if mesh is not None else sustained_seconds(run, window)
    return seconds / TENSORS


def measure_links(ranks: int, megabytes: int = 32, window: float = WINDOW_S) -> tuple[float, float]:
    """Return the all-reduce bandwidth (ring bytes per rank over its time) and one message step's latency (s)."""
    buffer, tiny = torch.ones(megabytes * 2**20 // 4), torch.ones(1)
    _together()
    seconds = collective_seconds(lambda: dist.all_reduce(buffer), window)
    bandwidth = 2.0 * (ranks - 1) / ranks * buffer.numel() * 4 / seconds
    _together()
    latency = collective_seconds(lambda: dist.all_reduce(tiny), window) / (2 * (ranks - 1))  # a ring's steps
    return bandwidth, latency


def _together() -> None:
    """Start the next measurement on every rank at once (the ranks contend as the trainer's do)."""
    dist.barrier()


def _rank(rank: int, ranks: int, port: int, threads: int, sizes: Sequence[int], window: float, out: object) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    try:
        matmul = measure_matmul(sizes, window)
        memory, op = measure_memory(window=window), measure_op_overhead(window)
        optimizer = measure_optimizer(window=window)
        from torch.distributed.device_mesh import init_device_mesh

        tensor = measure_tensor_overhead(None, window)
        dtensor = measure_tensor_overhead(init_device_mesh("cpu", (ranks,)), window)
        bandwidth, latency = measure_links(ranks, window=window)
        mine = (matmul, memory, op, optimizer, bandwidth, latency, tensor, dtensor)
        everyone: list[object] = [None] * ranks
        dist.all_gather_object(everyone, mine)
        if rank == 0:
            out.put(everyone)  # type: ignore[attr-defined]
    finally:
        dist.destroy_process_group()


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
                    optimizer_bandwidth=mean(3), tensor_overhead=mean(6), dtensor_overhead=mean(7))


def device_text(name: str, m: Measured, memory_bytes: int) -> str:
    """Return the .hpf text of the device `name` calibration measured."""
    peak = max(flops for _, flops in m.matmul)
    points = "  ".join(f"{n} {max(flops / peak, 1e-4):.4f}" for n, flops in m.matmul)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"""// Measured by `hpdsl calibrate` on {stamp}: {m.threads} torch threads, {m.ranks} gloo ranks.
// peak: the fastest fp32 square matmul measured (the curve's shares are relative to it);
// memory bandwidth: a 256 MiB tensor copy, bytes read and written over its time;
// links: a gloo all-reduce between {m.ranks} processes on this machine (ring bytes per rank), and a
//   one-element all-reduce over its 2(n - 1) ring steps (link_latency);
// op_overhead: a tiny Linear's forward and backward (one op's host time); optimizer_bandwidth: AdamW's step
//   over {OPTIMIZER_PARAMS} fp32 parameters, 2 passes over weights, gradients and two states;
// tensor_overhead, dtensor_overhead: the gradient norm, AdamW's step and zero_grad over {TENSORS} tiny
//   parameters, per parameter: plain tensors, and DTensors sharded over the {m.ranks} ranks.
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
  source = "hpdsl calibrate, {stamp}"
  curve matmul {{ {points} }}
}}
"""


def _float(value: float) -> str:
    mantissa, _, exponent = f"{value:.4e}".partition("e")
    return f"{mantissa}e{int(exponent):+d}"
