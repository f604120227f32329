"""A parallel training strategy as a frozen value, and many of them as a grid of numpy arrays.

`Strategy` is what a user states (one candidate); `StrategyGrid` holds one numpy
array per field (enumerated choices as small integer codes), which is what the
pricing code reads, so one strategy is simply a grid of length 1. Byte widths
of gradients, optimizer states, norms and dropout masks come from the profile's
run facts (docs/reference.md#run-facts); the compute, parameter and softmax
widths are strategy fields (bf16 = 2 bytes by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs
import numpy as np

from hpdsl.cost.devices import UnknownDeviceError, get_machine
from hpdsl.cost.time.devices import CATALOG
from hpdsl.cost.precision import OPTIMIZER_NAMES, PRECISION_NAMES
from hpdsl.errors import InputError

RECOMPUTE = ("none", "selective", "full")
"""Activation recompute: nothing; the score tensors of core attention (Korthikanti et al.); whole layers."""
ZERO = ("none", "os", "os+grad", "os+grad+params")
"""Optimizer sharding over the data-parallel group (ZeRO stages 0 to 3)."""
CP_KINDS = ("ring", "a2a")
"""Context parallelism: ring attention passes key/value chunks; all-to-all (Ulysses) swaps heads."""
IMPLS = ("fused", "hf-sdpa", "hf-eager", "hf-sdpa-cpu")
"""What saves the activations: fused kernels (flash attention, fused norm and activation, as
Megatron/TransformerEngine); transformers' modules with SDPA on a GPU (a fused kernel always:
flash, or memory-efficient where the qk and v head sizes differ or a float bias is added);
transformers' eager attention; transformers' modules with SDPA on CPU (its math kernel where
its flash kernel cannot run) (docs/cost-model.md#activations-per-implementation)."""
ALL_LAYERS = 0
"""recompute_layers code for "every layer of the stage"."""

Recompute = Literal["none", "selective", "full"]
Zero = Literal["none", "os", "os+grad", "os+grad+params"]
CpKind = Literal["ring", "a2a"]
Impl = Literal["fused", "hf-sdpa", "hf-eager"]


@attrs.frozen(auto_exc=True)
class InvalidStrategyError(InputError):
    """A strategy cannot run the model: carries every reason."""

    reasons: tuple[str, ...] = ()


@attrs.frozen
class Strategy:
    """One parallel layout, batch shape, memory policy and hardware assumption.

    The devices in use are dp·tp·pp·cp; ep and etp are carved out of dp·cp·tp for
    the expert layers (Megatron's expert mesh: ep·etp divides dp·cp·tp).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 1                          # virtual pipeline stages (model chunks) per rank
    pp_split: tuple[int, ...] | None = None  # body layers per chunk, pp·vpp entries, model order
    cp_kind: str = "ring"
    sequence_parallel: bool | None = None  # None: the profile's shard_activations run fact
    micro_batch: int = 1
    global_batch: int | None = None       # sequences per step; None: micro_batch·dp·pp
    seq_len: int = 4096
    recompute: str = "none"
    recompute_layers: int | None = None   # recompute only the first N layers of each chunk
    zero: str = "none"
    precision: str = "bf16-mixed"         # hpdsl/cost/precision.py PRECISIONS
    optimizer: str = "adam"               # hpdsl/cost/precision.py OPTIMIZERS
    param_bytes: int | None = None        # None: the precision's weight width
    compute_bytes: int | None = None      # activations saved for backward; None: the precision's
    softmax_bytes: int = 2                # the softmax output kept for its backward
    flash_attention: bool = True          # no score-shaped tensor is saved (only the row statistics)
    impl: str = "fused"                   # IMPLS: what the saved activations are those of
    device: str = "h100"
    mfu: float = 0.4                      # fraction of peak FLOP/s reached on the executed FLOPs
    num_devices: int | None = None        # the job's device count, when stated

    @property
    def devices(self) -> int:
        """Return the number of devices the layout uses (dp·tp·pp·cp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def batch(self) -> int:
        """Return the global batch in sequences (the stated one or micro_batch·dp·pp)."""
        return self.global_batch or self.micro_batch * self.dp * self.pp

    @property
    def micro_batches(self) -> int:
        """Return micro-batches per step per data-parallel rank (at least 1)."""
        return max(1, self.batch // max(1, self.micro_batch * self.dp))

    def with_(self, **changes: Any) -> Strategy:
        """Return a copy with `changes` applied."""
        return attrs.evolve(self, **changes)


INT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len",
              "recompute_layers", "param_bytes", "compute_bytes", "softmax_bytes", "num_devices")
CODE_FIELDS = ("split_id", "cp_kind", "sp", "recompute", "zero", "flash", "device_id", "precision",
               "optimizer", "impl")
GRID_FIELDS = (*INT_FIELDS, *CODE_FIELDS, "mfu")
TRACED = ("tp", "cp", "ep", "etp", "dp", "micro_batch", "seq_len", "global_batch", "mfu")
"""The fields a compiled plan takes as arguments (hpdsl/cost/trace.py); the others key the plan."""


@attrs.frozen(eq=False)
class StrategyGrid:
    """Many strategies as parallel numpy arrays (int64, except mfu: float64).

    Codes: cp_kind, recompute, zero, precision, optimizer and impl index CP_KINDS,
    RECOMPUTE, ZERO, PRECISION_NAMES, OPTIMIZER_NAMES and IMPLS (-1: unknown name);
    param_bytes and compute_bytes 0 mean "the precision's"; sp is 1/0, or -1 for "the profile's default"; global_batch 0
    means micro_batch·dp·pp; recompute_layers 0 means every layer; num_devices 0
    means unstated; split_id indexes `splits` (entry 0 is the even split);
    device_id indexes `devices` (-1: unknown).
    """

    arrays: dict[str, np.ndarray]
    splits: tuple[tuple[int, ...] | None, ...] = (None,)
    devices: tuple[str, ...] = attrs.field(factory=CATALOG.keys)

    def __len__(self) -> int:
        return len(self.arrays["tp"])

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def from_strategies(cls, strategies: Sequence[Strategy]) -> StrategyGrid:
        """Return the grid of `strategies`, in order."""
        splits: list[tuple[int, ...] | None] = [None]
        columns: dict[str, list[Any]] = {name: [] for name in GRID_FIELDS}
        for strategy in strategies:
            split = tuple(strategy.pp_split) if strategy.pp_split is not None else None
            if split not in splits:
                splits.append(split)
            for name, value in codes_of(strategy, splits.index(split)).items():
                columns[name].append(value)
        arrays = {name: np.asarray(values, dtype=np.float64 if name == "mfu" else np.int64)
                  for name, values in columns.items()}
        return cls(arrays, tuple(splits))

    @classmethod
    def from_arrays(cls, n: int, **arrays: np.ndarray | int | float) -> StrategyGrid:
        """Return a grid of `n` strategies: the given arrays (or scalars) over Strategy's defaults."""
        defaults = codes_of(Strategy(), 0)
        out = {}
        for name in GRID_FIELDS:
            value = arrays.pop(name, defaults[name])
            dtype = np.float64 if name == "mfu" else np.int64
            out[name] = np.broadcast_to(np.asarray(value, dtype=dtype), (n,)).copy()
        if arrays:
            raise TypeError(f"unknown grid fields {sorted(arrays)}; the fields are {list(GRID_FIELDS)}")
        return cls(out)

    def take(self, index: np.ndarray | slice) -> StrategyGrid:
        """Return the sub-grid at `index` (an integer or boolean array, or a slice).

        A column that is one value broadcast (the search's fixed choices) stays a
        broadcast view: picking from it copies nothing.
        """
        if isinstance(index, slice):
            size = len(range(len(self))[index])
        else:
            size = int(np.count_nonzero(index)) if index.dtype == bool else len(index)
        return StrategyGrid({k: np.broadcast_to(v[:1], (size,)) if v.strides == (0,) else v[index]
                             for k, v in self.arrays.items()}, self.splits, self.devices)

    def strategy(self, i: int) -> Strategy:
        """Return candidate `i` as a Strategy."""
        a = {name: int(self.arrays[name][i]) for name in GRID_FIELDS if name != "mfu"}
        sp = a["sp"]
        return Strategy(
            tp=a["tp"], pp=a["pp"], dp=a["dp"], cp=a["cp"], ep=a["ep"], etp=a["etp"], vpp=a["vpp"],
            pp_split=self.splits[a["split_id"]], cp_kind=_name(CP_KINDS, a["cp_kind"]),
            sequence_parallel=None if sp < 0 else bool(sp), micro_batch=a["micro_batch"],
            global_batch=a["global_batch"] or None, seq_len=a["seq_len"],
            recompute=_name(RECOMPUTE, a["recompute"]), recompute_layers=a["recompute_layers"] or None,
            zero=_name(ZERO, a["zero"]), param_bytes=a["param_bytes"] or None,
            compute_bytes=a["compute_bytes"] or None, precision=_name(PRECISION_NAMES, a["precision"]),
            optimizer=_name(OPTIMIZER_NAMES, a["optimizer"]),
            softmax_bytes=a["softmax_bytes"], flash_attention=bool(a["flash"]), impl=_name(IMPLS, a["impl"]),
            device=self.devices[a["device_id"]] if a["device_id"] >= 0 else "?",
            mfu=float(self.arrays["mfu"][i]), num_devices=a["num_devices"] or None)


def codes_of(s: Strategy, split_id: int) -> dict[str, Any]:
    """Return the grid codes of one strategy (unknown names become -1 for the checks to report)."""
    out: dict[str, Any] = {name: getattr(s, name) or 0 for name in INT_FIELDS}
    out.update(
        split_id=split_id, cp_kind=_code(CP_KINDS, s.cp_kind), recompute=_code(RECOMPUTE, s.recompute),
        zero=_code(ZERO, s.zero), flash=int(bool(s.flash_attention)),
        precision=_code(PRECISION_NAMES, s.precision), optimizer=_code(OPTIMIZER_NAMES, s.optimizer),
        impl=_code(IMPLS, s.impl),
        sp=-1 if s.sequence_parallel is None else int(bool(s.sequence_parallel)),
        device_id=_device_code(s.device), mfu=float(s.mfu))
    return out


def _device_code(name: str) -> int:
    try:
        get_machine(name)  # resolved into the catalog, whose keys a grid's device table is
        return CATALOG.keys().index(name)
    except UnknownDeviceError:
        return -1


def _code(names: tuple[str, ...], name: str) -> int:
    return names.index(name) if name in names else -1


def _name(names: tuple[str, ...], code: int) -> str:
    return names[code] if 0 <= code < len(names) else "?"


def validate_strategy(strategy: Strategy, cost_model: Any) -> tuple[str, ...]:
    """Return every reason `strategy` cannot run `cost_model` (empty: it can)."""
    from hpdsl.cost.validate import strategy_reasons

    return strategy_reasons(strategy, cost_model)


def require_valid(strategy: Strategy, cost_model: Any) -> None:
    """Raise InvalidStrategyError listing every reason if `strategy` cannot run `cost_model`."""
    reasons = validate_strategy(strategy, cost_model)
    if reasons:
        name = getattr(cost_model, "cost_model", cost_model).model.name
        listed = "\n".join(f"  - {reason}" for reason in reasons)
        raise InvalidStrategyError(f"the strategy cannot run {name}:\n{listed}", reasons)
