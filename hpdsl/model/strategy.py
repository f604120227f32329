"""A parallel training strategy, declared once: its parallel degrees, its batch and its recipe.

`Strategy` is what a user states (one candidate) and what every stage reads: the
estimator prices it (hpdsl/cost/), the torch backend runs it (hpdsl/torch/).
Each field is declared here once, with what the other forms of a strategy are
derived from (the field's metadata, read through `strategy_fields`):

- `part`: which part of the strategy it is: a parallel degree (the axes of
  AxisSizes, hpdsl/model/axes.py, plus the pipeline's layout), the batch, or the
  recipe (precision, optimizer, recompute, ZeRO, kernels, device);
- `flag` and `help`: its command-line option (hpdsl/cli/options.py), when it has one;
- `encode` and `column`: how the pricing's grid holds it as a number
  (hpdsl/cost/facts/grid.py): an int (None: 0), a choice's index, a bool (1/0),
  a tri-state (None: -1), the device's index, the pipeline split's index, a float.

Its JSON is `attrs.asdict` of it (hpdsl/cost/estimate.py). Byte widths of
gradients, optimizer states, norms and dropout masks come from the profile's run
facts (docs/reference.md#run-facts); the compute, parameter and softmax widths
are strategy fields (bf16 = 2 bytes by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import attrs

from hpdsl.model.axes import AxisSizes

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

PARTS = ("degree", "batch", "recipe")
"""What a strategy is composed of: the parallel degrees, the batch, the recipe."""
DEVICE_NAMES = ("a100_80gb", "ascend910b", "b200", "cpu", "h100_sxm", "h200", "mi300x")
"""The shipped devices' names, as devices/*.hpf declares them (tests/cli/test_ci_choices.py holds them
equal to the compiled catalog, hpdsl/cost/facts/machines.py)."""

DEVICE_ALIASES = ("a100", "h100")
"""Short names `--device` lists beside DEVICE_NAMES (hpdsl/cost/facts/machines.py's ALIASES resolves them)."""

DEVICE_NAMES_HELP = ("a shipped device (a100_80gb, ascend910b, b200, cpu, h100_sxm, h200, mi300x; a100 and h100 "
                     "for short) or a .hpf file declaring one")
CLUSTER_HELP = "a shipped cluster (dgx_a100, dgx_h100) or a .hpf file declaring one: its tiers price communication"
MFU_HELP = ("price every executed FLOP at this fraction of peak FLOP/s (the constant-efficiency model, e.g. 0.4); "
            "default 0: the device time model, its matmul curve, memory bandwidth and links price every op "
            "(docs/cost-model.md#the-device-time-model)")
IMPL_HELP = ("what saves the activations: fused (default: flash attention, fused norms and SwiGLU), hf-sdpa "
             "(transformers' modules, SDPA on a GPU), hf-eager or hf-sdpa-cpu (SDPA's CPU kernels)")


def _field(default: Any, part: str, encode: str = "int", *, flag: str | None = None, help: str = "",
           column: str | None = None, choices: tuple[str, ...] | None = None) -> Any:
    """Declare one Strategy field and what its other forms are derived from (see the module's docstring)."""
    return attrs.field(default=default, metadata={"part": part, "encode": encode, "flag": flag, "help": help,
                                                  "column": column, "choices": choices})


@attrs.frozen
class Strategy:
    """One parallel layout, batch shape, memory policy and hardware assumption.

    The devices in use are dp·tp·pp·cp; ep and etp are carved out of dp·cp·tp for
    the expert layers (Megatron's expert mesh: ep·etp divides dp·cp·tp).
    """

    tp: int = _field(1, "degree", flag="--tp", help="tensor-parallel degree")
    pp: int = _field(1, "degree", flag="--pp", help="pipeline stages")
    dp: int = _field(1, "degree", flag="--dp", help="data-parallel degree")
    cp: int = _field(1, "degree", flag="--cp", help="context-parallel degree")
    ep: int = _field(1, "degree", flag="--ep", help="expert-parallel degree (ep·etp must divide dp·cp·tp)")
    etp: int = _field(1, "degree", flag="--etp", help="expert tensor-parallel degree")
    vpp: int = _field(1, "degree", flag="--vpp", help="virtual pipeline stages (model chunks) per rank")
    pp_split: tuple[int, ...] | None = _field(  # body layers per chunk, pp·vpp entries, model order
        None, "degree", "split", flag="--pp-split", column="split_id",
        help="body layers per chunk, comma-separated (pp·vpp entries)")
    cp_kind: str = _field("ring", "degree", "choice", flag="--cp-kind", choices=CP_KINDS,
                          help="context parallelism: ring or a2a (Ulysses)")
    sequence_parallel: bool | None = _field(  # None: the profile's shard_activations run fact
        None, "degree", "tristate", flag="--sp/--no-sp", column="sp",
        help="sequence parallelism (default: the profile's shard_activations)")
    micro_batch: int = _field(1, "batch", flag="--micro-batch", help="sequences per micro-batch")
    global_batch: int | None = _field(  # sequences per step; None: micro_batch·dp·pp
        None, "batch", flag="--global-batch", help="sequences per step (default micro-batch·dp·pp)")
    seq_len: int = _field(4096, "batch", flag="--seq-len", help="sequence length in tokens")
    recompute: str = _field("none", "recipe", "choice", flag="--recompute", choices=RECOMPUTE,
                            help="none, selective or full")
    recompute_layers: int | None = _field(  # recompute only the first N layers of each chunk
        None, "recipe", flag="--recompute-layers", help="recompute only the first N layers of each chunk")
    zero: str = _field("none", "recipe", "choice", flag="--zero", choices=ZERO,
                       help="optimizer sharding: none, os, os+grad, os+grad+params")
    precision: str = _field("bf16-mixed", "recipe", "choice", flag="--precision",  # cost/facts/precision.py
                            help="bf16-mixed (default), fp8-mixed or fp32")
    optimizer: str = _field("adam", "recipe", "choice", flag="--optimizer",  # cost/facts/precision.py
                            help="adam (default), sgd-momentum or adafactor")
    param_bytes: int | None = _field(None, "recipe")      # None: the precision's weight width
    compute_bytes: int | None = _field(None, "recipe")    # activations saved for backward; None: the precision's
    softmax_bytes: int = _field(2, "recipe", flag="--softmax-bytes",  # the softmax output kept for its backward
                                help="bytes per saved softmax element without flash (default 2; "
                                     "4 for an fp32 softmax)")
    flash_attention: bool = _field(True, "recipe", "bool", flag="--flash/--no-flash", column="flash",
                                   help="flash attention (no score tensors saved)")
    impl: str = _field("fused", "recipe", "choice", flag="--impl", choices=IMPLS, help=IMPL_HELP)
    device: str = _field("h100", "recipe", "device", flag="--device", column="device_id", help=DEVICE_NAMES_HELP)
    mfu: float = _field(0.0, "recipe", "float", flag="--mfu",  # 0: the device time model; else peak share
                        help=MFU_HELP)
    num_devices: int | None = _field(None, "degree", flag="--devices",  # the job's device count, when stated
                                     help="the job's device count (checked against dp·tp·pp·cp)")

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

    def axis_sizes(self) -> AxisSizes:
        """Return the parallel degrees as validated AxisSizes (AxisSizeError if one is not a positive int)."""
        return AxisSizes(**{axis: getattr(self, axis) for axis in attrs.fields_dict(AxisSizes)})

    def part(self, name: str) -> dict[str, Any]:
        """Return the fields of one part of the strategy (one of PARTS) by name."""
        return {f.name: getattr(self, f.name) for f in strategy_fields() if f.metadata["part"] == name}

    def with_(self, **changes: Any) -> Strategy:
        """Return a copy with `changes` applied."""
        return attrs.evolve(self, **changes)


def strategy_fields() -> tuple[attrs.Attribute, ...]:
    """Return Strategy's fields in declaration order, each with its metadata."""
    return attrs.fields(Strategy)


def flag_fields() -> Iterator[attrs.Attribute]:
    """Yield the fields that have a command-line flag, in declaration order."""
    return (f for f in strategy_fields() if f.metadata["flag"] is not None)
