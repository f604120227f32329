"""A model and a device count into the space a search chooses from: the layouts the model allows, each choice's values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import attrs
import numpy as np

from hpdsl.cost.facts.bounds import MAX_CANDIDATES
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.feasibility.problems import InvalidStrategyError
from hpdsl.cost.feasibility.rules import invalid_mask
from hpdsl.cost.price.types import Prepared
from hpdsl.model.strategy import CP_KINDS, RECOMPUTE, Strategy, ZERO


def divisors(n: int) -> list[int]:
    """Return the divisors of n in increasing order."""
    return list(_divisors(n))


@cache
def _divisors(n: int) -> tuple[int, ...]:
    # Memoised: `layouts` asks for the divisors of the same few numbers thousands of times.
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0] if n > 0 else []
    return tuple(small + [n // d for d in reversed(small) if d * d != n])


def layouts(devices: int, experts: int, *, tp_of: int = 0, etp_of: int = 0, cp_of: int = 0,
            dp_of: int = 0, pp_max: int = 0) -> np.ndarray:
    """Return (L, 6) rows tp, cp, pp, dp, ep, etp with dp·tp·pp·cp = devices, ep·etp | dp·cp·tp.

    `tp_of`, `etp_of`, `cp_of` and `dp_of`, when not 0, are numbers every tp (etp,
    cp, dp) must divide, and `pp_max` the most pipeline stages (a stage holds at
    least one layer): the rules refuse the others anyway (the model's widths; the
    sequence split over cp; the global batch split over dp), and leaving them out
    early keeps a device count with many divisors (720,720) or a large power of two
    (131,072) from enumerating millions of rows.
    """
    blocks: list[np.ndarray] = []
    for tp in _divisors(devices):
        if tp_of and tp_of % tp:
            continue
        for cp in _divisors(devices // tp):
            if cp_of and cp_of % cp:
                continue
            for pp in _divisors(devices // (tp * cp)):
                if pp_max and pp > pp_max:
                    break
                dp = devices // (tp * cp * pp)
                if dp_of and dp_of % dp:
                    continue
                experts_of = _expert_layouts(dp * cp * tp, experts, etp_of)
                block = np.empty((len(experts_of), 6), dtype=np.int64)
                block[:, :4], block[:, 4:] = (tp, cp, pp, dp), experts_of
                blocks.append(block)
    return np.concatenate(blocks) if blocks else np.zeros((0, 6), dtype=np.int64)


@cache
def _expert_layouts(mesh: int, experts: int, etp_of: int) -> np.ndarray:
    """Return the (ep, etp) pairs of a mesh of `mesh` devices: ep·etp | mesh, ep | experts, etp | etp_of."""
    if experts <= 1:
        return np.ones((1, 2), dtype=np.int64)
    pairs = [(ep, etp) for ep in _divisors(mesh) if experts % ep == 0
             for etp in _divisors(mesh // ep) if not etp_of or etp_of % etp == 0]
    out = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    out.setflags(write=False)  # cached: shared by every call
    return out


@attrs.frozen(eq=False)
class Space:
    """What a search chooses from: the model's layouts and each list's values, candidates as index tuples.

    A candidate is (vpp, layout, micro-batch, recompute, zero, cp kind) indices into
    `options`, the enumeration order is that tuple's (cp kind fastest), and `grid`
    builds the strategies of any index arrays, so a search can materialise a part of
    the product (hpdsl/cost/sweep/prune.py) and order it as the whole one would be.
    """

    rows: np.ndarray                      # (L, 6) tp, cp, pp, dp, ep, etp, sorted by pp
    options: tuple[np.ndarray, ...]       # vpp values, layout indices, micro-batches, recompute, zero, cp kind codes
    base: Strategy
    devices: int
    global_batch: int
    seq_len: int
    mesh_ids: np.ndarray                  # (L,) each layout's (tp, cp, ep, etp) as a small id (work_codes)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Return how many values each of the six choices has."""
        return tuple(len(o) for o in self.options)

    def grid(self, vi: np.ndarray, ri: np.ndarray, mi: np.ndarray, ci: np.ndarray, zi: np.ndarray,
             ki: np.ndarray) -> StrategyGrid:
        """Return the candidates at the given indices (vpp, layout, micro-batch, recompute, zero, cp kind)."""
        (vp, _, mb, rc, zr, ck), n = self.options, len(ri)
        # A column at a time: each array contiguous (a column of an (n, 6) gather strides, and every
        # elementwise operation on it in context and the rules runs at half speed).
        tp, cp, pp, dp, ep, etp = (self.rows[ri, k] for k in range(6))
        template = StrategyGrid.from_strategies([self.base])
        arrays = {name: np.broadcast_to(value, (n,)) for name, value in template.arrays.items()}
        arrays.update(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp,
                      micro_batch=mb[mi], recompute=rc[ci], zero=zr[zi], cp_kind=ck[ki], vpp=vp[vi],
                      sp=(tp > 1).astype(np.int64),
                      global_batch=np.broadcast_to(self.global_batch, (n,)),
                      seq_len=np.broadcast_to(self.seq_len, (n,)), num_devices=np.broadcast_to(self.devices, (n,)),
                      split_id=np.broadcast_to(0, (n,)), recompute_layers=np.broadcast_to(0, (n,)))
        return StrategyGrid({k: np.asarray(v, dtype=np.float64 if k == "mfu" else np.int64)
                             for k, v in arrays.items()}, template.splits, template.devices)

    def work_codes(self, ri: np.ndarray, mi: np.ndarray, ci: np.ndarray, ki: np.ndarray) -> np.ndarray:
        """Return a code per candidate, equal only where candidates differ in nothing but vpp, pp, dp and ZeRO.

        Such candidates do the same work per column (hpdsl/cost/price/grid.py's work_table):
        the search prices it once per code.
        """
        s = self.sizes
        return ((self.mesh_ids[ri] * s[2] + mi) * s[3] + ci) * s[5] + ki

    def kept(self, ri: np.ndarray, ki: np.ndarray) -> np.ndarray:
        """Return which candidates the search keeps: the cp kind only varies where cp > 1."""
        return (self.rows[ri, 1] > 1) | (self.options[5][ki] == CP_KINDS.index(self.base.cp_kind))


def search_space(prepared: Prepared, devices: int, *, global_batch: int, seq_len: int,
                 micro_batches: Sequence[int] = (1, 2, 4, 8), recompute: Sequence[str] = RECOMPUTE,
                 zero: Sequence[str] = ZERO, cp_kinds: Sequence[str] = CP_KINDS, vpp: Sequence[int] = (1,),
                 base: Strategy = Strategy()) -> Space:
    """Return the choices a search for `devices` makes, the layouts the model allows among them."""
    rows = _model_layouts(prepared, devices, global_batch=global_batch, seq_len=seq_len)
    rows = rows[np.argsort(rows[:, 2], kind="stable")]   # by pp, so a chunk holds few layouts
    options = (np.asarray(vpp, dtype=np.int64), np.arange(len(rows)), np.asarray(micro_batches, dtype=np.int64),
               np.asarray([RECOMPUTE.index(r) for r in recompute], dtype=np.int64),
               np.asarray([ZERO.index(z) for z in zero], dtype=np.int64),
               np.asarray([CP_KINDS.index(k) for k in cp_kinds], dtype=np.int64))
    # tp, cp, ep and etp divide the devices: their places among its divisors, in a mixed radix
    radix = np.asarray(_divisors(devices))
    places = np.searchsorted(radix, rows[:, [0, 1, 4, 5]])
    mesh_ids = ((places[:, 0] * len(radix) + places[:, 1]) * len(radix) + places[:, 2]) * len(radix) + places[:, 3]
    return Space(rows, options, base, devices, global_batch, seq_len, mesh_ids)


def enumerate_grid(prepared: Prepared, devices: int, *, global_batch: int, seq_len: int,
                   micro_batches: Sequence[int] = (1, 2, 4, 8),
                   recompute: Sequence[str] = RECOMPUTE, zero: Sequence[str] = ZERO,
                   cp_kinds: Sequence[str] = CP_KINDS, vpp: Sequence[int] = (1,),
                   base: Strategy = Strategy()) -> StrategyGrid:
    """Return every candidate (valid or not) for `devices` as a grid, grouped by pipeline layout."""
    space = search_space(prepared, devices, global_batch=global_batch, seq_len=seq_len,
                         micro_batches=micro_batches, recompute=recompute, zero=zero, cp_kinds=cp_kinds,
                         vpp=vpp, base=base)
    return full_grid(space)


def full_grid(space: Space) -> StrategyGrid:
    """Return the whole product of a space's choices, in enumeration order (refused past MAX_CANDIDATES)."""
    sizes = space.sizes
    if math.prod(sizes) > MAX_CANDIDATES:
        raise too_many(math.prod(sizes))
    # vpp outermost, then layouts: grouped by (vpp, pp). Each option's column of the
    # product is its index repeated (the options inside it) and tiled (those outside).
    index = [np.tile(np.repeat(np.arange(size), math.prod(sizes[k + 1:])), math.prod(sizes[:k]))
             for k, size in enumerate(sizes)]
    keep = space.kept(index[1], index[5])
    return space.grid(*(i[keep] for i in index))


def _model_layouts(prepared: Prepared, devices: int, *, global_batch: int = 0, seq_len: int = 0) -> np.ndarray:
    """Return the layouts the model's rules allow whatever the other choices (heads, experts, widths).

    A dp that does not divide the global batch, a cp that does not divide the
    sequence, or more pipeline stages than layers is refused whatever the
    micro-batch, cp kind or vpp (hpdsl/cost/feasibility/rules.py).
    """
    experts = max(c.experts for c in prepared.columns.configs)
    shape = prepared.checks().checks.shape
    tp_of = math.gcd(*(count for _, count in (*shape.heads, *shape.tp_widths)))
    rows = layouts(devices, experts, tp_of=tp_of, etp_of=math.gcd(*shape.expert_widths),
                   cp_of=max(seq_len, 0), dp_of=max(global_batch, 0), pp_max=shape.layers)
    probe = StrategyGrid.from_arrays(len(rows), **dict(zip(("tp", "cp", "pp", "dp", "ep", "etp"), rows.T)),
                                     sp=(rows[:, 0] > 1).astype(np.int64))
    return rows[~invalid_mask(prepared.columns, probe, model_only=True, shape=shape)]


def plain_invalid(prepared: Prepared, grid: StrategyGrid) -> np.ndarray:
    """Return invalid_mask(columns, grid, requires=False) through the model's cached checks (its shape found once)."""
    checks = prepared.checks().checks
    bad = np.zeros(len(grid), dtype=bool)
    for rule in checks.plain:   # every rule but the families' requires, which the search's layouts passed
        bad |= rule.bad(grid, checks.shape)
    return bad


def too_many(count: int, what: str = "price", things: str = "candidates") -> InvalidStrategyError:
    """Return the refusal of a search that would price candidates (or bound rows) past MAX_CANDIDATES."""
    reason = (f"the search would {what} {count:,} {things}, more than {MAX_CANDIDATES:,}: "
              "try fewer --micro-batches or --vpp values, or a device count with fewer divisors")
    return InvalidStrategyError(f"cannot search:\n  - {reason}", (reason,))
