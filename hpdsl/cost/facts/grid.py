"""Many strategies as a grid of numpy arrays: the encoding of Strategy's fields the pricing reads.

`Strategy` (hpdsl/model/strategy.py) is what a user states; `StrategyGrid` holds
one numpy array per column (enumerated choices as small integer codes), which is
what the pricing code reads, so one strategy is simply a grid of length 1. The
columns and their codes are derived from Strategy's declaration (each field's
`encode` and `column` metadata), never spelled out again here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from hpdsl.cost.facts.devices import UnknownDeviceError, get_machine
from hpdsl.cost.facts.machines import CATALOG
from hpdsl.cost.facts.precision import OPTIMIZER_NAMES, PRECISION_NAMES
from hpdsl.model.strategy import Strategy, strategy_fields

TRACED = ("tp", "cp", "ep", "etp", "dp", "micro_batch", "seq_len", "global_batch", "mfu")
"""The fields a compiled plan takes as arguments, in its order (hpdsl/cost/formulas/trace.py); the others key the plan."""

NAMES: dict[str, tuple[str, ...]] = {"precision": PRECISION_NAMES, "optimizer": OPTIMIZER_NAMES}
"""The names of the choice fields whose vocabulary is a cost fact (the others declare theirs: `choices`)."""


def column(field: attrs.Attribute) -> str:
    """Return the grid column of a Strategy field (its `column` metadata, else its name)."""
    return field.metadata["column"] or field.name


GRID_FIELDS = tuple(column(f) for f in strategy_fields())
"""Every column of a grid, in Strategy's field order (mfu float64, the rest int64)."""


def _choices(field: attrs.Attribute) -> tuple[str, ...]:
    return field.metadata["choices"] or NAMES[field.name]


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


def _encoder(field: attrs.Attribute) -> Callable[[Any, int], Any]:
    """Return (value, split id) -> the field's grid code (unknown names: -1, for the checks to report)."""
    kind = field.metadata["encode"]
    if kind == "choice":
        names = _choices(field)
        return lambda value, _split: _code(names, value)
    return {"int": lambda value, _split: 0 if value is None else value,  # 0 if None: the value may be traced
            "bool": lambda value, _split: int(bool(value)),
            "tristate": lambda value, _split: -1 if value is None else int(bool(value)),
            "device": lambda value, _split: _device_code(value),
            "split": lambda _value, split: split,
            "float": lambda value, _split: value * 1.0}[kind]  # `* 1.0`, not float(): a traced value stays one


def _decoder(field: attrs.Attribute, splits: Sequence[tuple[int, ...] | None],
             devices: Sequence[str]) -> Callable[[Any], Any]:
    """Return grid code -> the field's value (the inverse of its encoder; unknown codes: "?")."""
    kind = field.metadata["encode"]
    if kind == "choice":
        names = _choices(field)
        return lambda code: _name(names, int(code))
    if kind == "int":
        return (lambda code: int(code) or None) if field.default is None else (lambda code: int(code))
    return {"bool": lambda code: bool(code),
            "tristate": lambda code: None if code < 0 else bool(code),
            "device": lambda code: devices[int(code)] if code >= 0 else "?",
            "split": lambda code: splits[int(code)],
            "float": lambda code: float(code)}[kind]


_ENCODERS = tuple((f.name, column(f), _encoder(f)) for f in strategy_fields())


def codes_of(s: Strategy, split_id: int) -> dict[str, Any]:
    """Return the grid codes of one strategy by column (unknown names become -1 for the checks to report)."""
    return {name: encode(getattr(s, field), split_id) for field, name, encode in _ENCODERS}


@attrs.frozen(eq=False)
class StrategyGrid:
    """Many strategies as parallel numpy arrays (int64, except mfu: float64), one per GRID_FIELDS column.

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
        return Strategy(**{f.name: _decoder(f, self.splits, self.devices)(self.arrays[column(f)][i])
                           for f in strategy_fields()})
