"""This machine into a device .hpf: matmul throughput over sizes, memory bandwidth, collective bandwidth.

Measured with torch on the CPU (fp32, what `hpdsl train` runs): square matmuls of
rising size (the best time of a few runs each), a large tensor copy (bytes read
and written over its time), and an all-reduce between `ranks` gloo processes on
this machine (the ring's bytes per rank over its time). The device's peak is the
fastest matmul measured, so the curve's shares are relative to it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import attrs
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = (64, 128, 256, 512, 1024, 2048)
"""The square matmul sizes measured (m = n = k)."""


@attrs.frozen
class Measured:
    """What calibration measured: FLOP/s per matmul size, memory and collective bandwidth (bytes/s)."""

    matmul: tuple[tuple[int, float], ...]
    memory_bandwidth: float
    collective_bandwidth: float
    ranks: int
    threads: int


def best_seconds(run: object, repeat: int) -> float:
    """Return the best wall time of `repeat` calls of `run` (after one warm-up call)."""
    assert callable(run)
    run()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def measure_matmul(sizes: Sequence[int] = SIZES, repeat: int = 3) -> tuple[tuple[int, float], ...]:
    """Return (size, FLOP/s) of fp32 square matmuls."""
    out = []
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        seconds = best_seconds(lambda: torch.matmul(a, b), repeat)
        out.append((n, 2.0 * n**3 / seconds))
    return tuple(out)


def measure_memory(megabytes: int = 256, repeat: int = 3) -> float:
    """Return bytes/s a tensor copy moves (read and write)."""
    src = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    seconds = best_seconds(lambda: dst.copy_(src), repeat)
    return 2.0 * src.numel() * 4 / seconds


def _all_reduce_rank(rank: int, ranks: int, port: int, megabytes: int, repeat: int, out: object) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    try:
        buffer = torch.ones(megabytes * 2**20 // 4)
        seconds = best_seconds(lambda: dist.all_reduce(buffer), repeat)
        if rank == 0:
            moved = 2.0 * (ranks - 1) / ranks * buffer.numel() * 4  # a ring's bytes per rank
            out.put(moved / seconds)  # type: ignore[attr-defined]
    finally:
        dist.destroy_process_group()


def measure_collective(ranks: int = 2, megabytes: int = 32, repeat: int = 3, port: int = 29533) -> float:
    """Return the all-reduce bandwidth (bytes/s per rank and direction) between `ranks` gloo processes here."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    mp.start_processes(_all_reduce_rank, args=(ranks, port, megabytes, repeat, queue), nprocs=ranks,
                       start_method="spawn")
    return float(queue.get(timeout=60))


def calibrate(ranks: int = 2, threads: int | None = None) -> Measured:
    """Measure this machine (torch's intra-op threads set to `threads`, default torch's own)."""
    if threads:
        torch.set_num_threads(threads)
    return Measured(measure_matmul(), measure_memory(), measure_collective(ranks), ranks, torch.get_num_threads())


def device_text(name: str, m: Measured, memory_bytes: int) -> str:
    """Return the .hpf text of the device `name` calibration measured."""
    peak = max(flops for _, flops in m.matmul)
    points = "  ".join(f"{n} {max(flops / peak, 1e-4):.4f}" for n, flops in m.matmul)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"""// Measured by `hpdsl calibrate` on {stamp}: {m.threads} torch threads, {m.ranks} gloo ranks.
// peak: the fastest fp32 square matmul measured (the curve's shares are relative to it);
// memory bandwidth: a {256} MiB tensor copy, bytes read and written over its best time;
// links: a gloo all-reduce between {m.ranks} processes on this machine (ring bytes per rank).
device {name} {{
  memory_bytes = {memory_bytes}
  memory_bandwidth = {_float(m.memory_bandwidth)}
  memory_efficiency = 1.0
  peak_bf16 = {_float(peak)}
  peak_fp32 = {_float(peak)}
  intra_node_bandwidth = {_float(m.collective_bandwidth)}
  inter_node_bandwidth = {_float(m.collective_bandwidth)}
  devices_per_node = {max(os.cpu_count() or 1, m.ranks)}
  source = "hpdsl calibrate, {stamp}"
  curve matmul {{ {points} }}
}}
"""


def _float(value: float) -> str:
    mantissa, _, exponent = f"{value:.4e}".partition("e")
    return f"{mantissa}e{int(exponent):+d}"
