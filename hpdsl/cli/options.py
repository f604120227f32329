"""The CLI's shared options and flag tables: the strategy and search flags, the model paths, --model, --set.

Every command that reads a strategy or a model declares its options from here, so
`hpdsl estimate`, `hpdsl search`, `hpdsl train` and `hpdsl diff` spell them once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

FlagTable = tuple[tuple[str, str, type, str], ...]
"""Rows of (flag, keyword, type, help)."""

ESTIMATE_FLAGS: FlagTable = (
    ("--tp", "tp", int, "tensor-parallel degree"),
    ("--pp", "pp", int, "pipeline stages"),
    ("--dp", "dp", int, "data-parallel degree"),
    ("--cp", "cp", int, "context-parallel degree"),
    ("--cp-kind", "cp_kind", str, "context parallelism: ring or a2a (Ulysses)"),
    ("--ep", "ep", int, "expert-parallel degree (ep·etp must divide dp·cp·tp)"),
    ("--etp", "etp", int, "expert tensor-parallel degree"),
    ("--sp/--no-sp", "sequence_parallel", bool, "sequence parallelism (default: the profile's "
                                                 "shard_activations)"),
    ("--vpp", "vpp", int, "virtual pipeline stages (model chunks) per rank"),
    ("--pp-split", "pp_split", str, "body layers per chunk, comma-separated (pp·vpp entries)"),
    ("--micro-batch", "micro_batch", int, "sequences per micro-batch"),
    ("--global-batch", "global_batch", int, "sequences per step (default micro-batch·dp·pp)"),
    ("--seq-len", "seq_len", int, "sequence length in tokens"),
    ("--recompute", "recompute", str, "none, selective or full"),
    ("--recompute-layers", "recompute_layers", int, "recompute only the first N layers of each chunk"),
    ("--zero", "zero", str, "optimizer sharding: none, os, os+grad, os+grad+params"),
    ("--precision", "precision", str, "bf16-mixed (default), fp8-mixed or fp32"),
    ("--optimizer", "optimizer", str, "adam (default), sgd-momentum or adafactor"),
    ("--device", "device", str, "h100, h200, a100, mi300x or ascend910b"),
    ("--mfu", "mfu", float, "fraction of peak FLOP/s reached (default 0.4)"),
    ("--flash/--no-flash", "flash_attention", bool, "flash attention (no score tensors saved)"),
    ("--softmax-bytes", "softmax_bytes", int, "bytes per saved softmax element without flash (default 2; "
                                               "4 for an fp32 softmax)"),
    ("--impl", "impl", str, "what saves the activations: fused (default: flash attention, fused norms and "
                            "SwiGLU), hf-sdpa (transformers' modules, SDPA on a GPU), hf-eager or "
                            "hf-sdpa-cpu (SDPA's CPU kernels)"),
    ("--devices", "num_devices", int, "the job's device count (checked against dp·tp·pp·cp)"),
)
"""`hpdsl estimate` flags: (flag, Strategy field, type, help). Unset flags keep Strategy's defaults."""

SEARCH_FLAGS: FlagTable = (
    ("--devices", "devices", int, "devices to use (required)"),
    ("--memory-gib", "memory_gib", float, "memory per device in GiB (default: the device's)"),
    ("--top", "top", int, "strategies to show (default 10)"),
    ("--device", "device", str, "h100, h200, a100, mi300x or ascend910b"),
    ("--global-batch", "global_batch", int, "sequences per step (default 1024)"),
    ("--seq-len", "seq_len", int, "sequence length (default 4096)"),
    ("--micro-batches", "micro_batches", str, "micro-batch sizes to try, comma-separated (1,2,4,8)"),
    ("--vpp", "vpp", str, "virtual stages to try, comma-separated (1)"),
    ("--precision", "precision", str, "bf16-mixed (default), fp8-mixed or fp32"),
    ("--optimizer", "optimizer", str, "adam (default), sgd-momentum or adafactor"),
    ("--impl", "impl", str, "what saves the activations: fused (default: flash attention, fused norms and "
                            "SwiGLU), hf-sdpa (transformers' modules, SDPA on a GPU), hf-eager or "
                            "hf-sdpa-cpu (SDPA's CPU kernels)"),
    ("--softmax-bytes", "softmax_bytes", int, "bytes per saved softmax element without flash (default 2)"),
    ("--pareto/--no-pareto", "pareto", bool, "print the memory/step-time frontier instead of the fastest"),
)
"""`hpdsl search` flags: (flag, search_command keyword, type, help)."""


set_option = click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE",
                          help="Override a model field (block fields by name: --set experts=4); repeatable.")


spec_paths = click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
model_option = click.option("--model", "model", help="The model to use when the files declare several.")
no_stdlib_option = click.option("--no-stdlib", is_flag=True,
                                help="Leave the standard profiles and families out.")


F = TypeVar("F", bound=Callable[..., Any])


def flag_options(table: FlagTable, *, required: tuple[str, ...] = ()
           ) -> Callable[[F], F]:
    """Declare one click option per row of a flag table (unset flags arrive as None)."""
    def decorate(command: F) -> F:
        for flag, name, kind, text in reversed(table):
            if kind is bool:
                command = click.option(flag, name, default=None, help=text)(command)
            elif name in required:  # no default at all: click 8.5 skips the check for default=None
                command = click.option(flag, name, type=kind, required=True, help=text)(command)
            else:
                command = click.option(flag, name, type=kind, default=None, help=text)(command)
        return command
    return decorate
