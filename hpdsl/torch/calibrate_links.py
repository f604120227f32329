"""This machine's timing and links, measured as `hpdsl train` runs its ranks: sustained times, collectives.

Every time here is sustained over a window (the mean per call, not the best one:
a step shares the cores with the other ranks and whatever else runs), every
collective begun by all ranks at once and called by each as often. The links:
the all-reduce's ring bandwidth and the latency of a message step, each other
collective's bandwidth (the tiers' efficiencies of the cluster calibrate writes),
and how much of a collective hides behind compute running beside it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

WINDOW_S = 0.25
"""Seconds each measurement runs for (at least MIN_CALLS calls): its time per call is the window's mean."""

MIN_CALLS = 3


def together() -> None:
    """Start the next measurement on every rank at once (the ranks contend as the trainer's do)."""
    dist.barrier()


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


LATENCY_KIB = (16, 64, 256)
"""All-reduce sizes (KiB) a message step's latency is read from: a layer's activations at small scale.

gloo answers a one-element all-reduce on a faster path than any tensor a step sends (0.5 ms
against 1.6 to 2.2 ms from 4 KiB to 256 KiB, 2 ranks on this machine), so the latency is what
these sizes take beyond their bytes at the measured bandwidth."""


def measure_links(ranks: int, megabytes: int = 32, window: float = WINDOW_S) -> tuple[float, float]:
    """Return the all-reduce bandwidth (ring bytes per rank over its time) and one message step's latency (s)."""
    buffer = torch.ones(megabytes * 2**20 // 4)
    ring = 2.0 * (ranks - 1) / ranks  # bytes per rank per byte reduced
    together()
    bandwidth = ring * buffer.numel() * 4 / collective_seconds(lambda: dist.all_reduce(buffer), window)
    steps = []
    for kib in LATENCY_KIB:
        small = torch.ones(kib * 256)
        together()
        seconds = collective_seconds(lambda: dist.all_reduce(small), window / len(LATENCY_KIB))
        steps.append(max(seconds - ring * kib * 1024 / bandwidth, 0.0) / (2 * (ranks - 1)))  # a ring's steps
    return bandwidth, sorted(steps)[len(steps) // 2]


REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
"""torch's reduce-scatter into one tensor (reduce_scatter_tensor, renamed in torch 2.13)."""
ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
"""torch's all-gather into one tensor (all_gather_into_tensor, renamed in torch 2.13: the old name warns)."""


def measure_collectives(ranks: int, megabytes: int = 32, window: float = WINDOW_S) -> tuple[tuple[str, float], ...]:
    """Return (collective, bytes/s) of gloo's all-gather, reduce-scatter and all-to-all of `megabytes`, and p2p.

    Each as the estimator counts its bytes: the (n − 1)/n of the whole tensor a rank receives
    (all-gather, all-to-all) or sends (reduce-scatter) over its time; p2p a send of the whole
    tensor to the neighbour rank while it sends its own back (every pair at once).
    """
    whole = torch.ones(megabytes * 2**20 // 4)
    shard = torch.ones(whole.numel() // ranks)
    received = torch.empty_like(whole)
    share = (ranks - 1) / ranks * whole.numel() * 4
    runs = {"all_gather": lambda: ALL_GATHER(whole, shard),
            "reduce_scatter": lambda: REDUCE_SCATTER(shard, whole),
            "all_to_all": lambda: dist.all_to_all_single(received, whole)}
    out = []
    for name, run in runs.items():
        together()
        out.append((name, share / collective_seconds(run, window)))
    rank = dist.get_rank()
    peer = rank ^ 1 if (rank ^ 1) < ranks else rank  # an odd last rank pairs with itself: it times a local copy

    def exchange() -> None:
        if peer == rank:
            received.copy_(whole)
            return
        for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, whole, peer), dist.P2POp(dist.irecv, received, peer)]):
            work.wait()

    together()
    out.append(("p2p", whole.numel() * 4 / collective_seconds(exchange, window)))
    return tuple(out)


def measure_overlap(window: float = WINDOW_S) -> float:
    """Return the share of an all-reduce's time that hides behind matmuls running beside it (0 to 1).

    A 32 MiB all-reduce and a loop of 256-cubed matmuls of about the same time, each alone and
    then together (the all-reduce issued asynchronously, as the backends overlap a gradient
    reduction with the backward): what the pair saves over running them one after the other,
    over the shorter alone. On a GPU the links and copy engines do the transfer; on a CPU the
    same cores do both.
    """
    buffer, a, b = torch.ones(8 * 2**20), torch.randn(256, 256), torch.randn(256, 256)
    together()
    reduce = collective_seconds(lambda: dist.all_reduce(buffer), window)
    per_matmul = sustained_seconds(lambda: torch.matmul(a, b), window / 2)
    count = torch.tensor([max(1, round(reduce / per_matmul))])
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    calls = int(count.item())

    def matmuls() -> None:
        for _ in range(calls):
            torch.matmul(a, b)

    def both() -> None:
        work = dist.all_reduce(buffer, async_op=True)
        matmuls()
        assert work is not None
        work.wait()

    together()
    compute = sustained_seconds(matmuls, window)
    together()
    paired = collective_seconds(both, window)
    return min(max((reduce + compute - paired) / min(reduce, compute), 0.0), 1.0)
