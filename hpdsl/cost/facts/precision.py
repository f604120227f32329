"""Mixed-precision recipes and optimizers: the bytes every parameter costs before ZeRO shards them.

One table each, read by the estimator (hpdsl/cost/formulas/context.py) and printed in
every estimate's header. The default is Megatron-LM's bf16 recipe: bf16
parameters, fp32 gradient accumulation and all-reduce (Megatron turns on
`accumulate_allreduce_grads_in_fp32` with `--bf16`), an fp32 master copy and
Adam's two fp32 moments: 2 + 4 + 4 + 8 = 18 bytes per parameter unsharded, the
"bf16 param, fp32 grads" row of Megatron's distributed-optimizer table
(docs/cost-model.md#static-memory). A profile's stated run facts
(`grad_bytes`, `main_param_bytes`, `optimizer_states`, `optimizer_state_bytes`)
override the table's values.

Each recipe also names the dtypes the device time model prices its arithmetic at
(docs/cost-model.md#the-device-time-model): fp8-mixed runs a layer's weight matmuls
at the device's fp8 peak (torchao's Float8Linear and Transformer Engine convert the
layers' linears; the head, attention's score matmuls and the rest stay bf16), fp32
everything at the fp32 peak (PyTorch does not use TF32 for matmuls by default).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Precision:
    """Bytes per parameter of one mixed-precision recipe (compute: per saved activation element)."""

    name: str
    param: int        # the weights the forward reads
    grad: int         # the gradient buffer (accumulated over micro-batches)
    master: int       # the optimizer's own copy of the weights (0: it updates the weights in place)
    extra: int        # other per-parameter state (fp8: the cached fp8 weight copy for the backward)
    compute: int      # activations saved for the backward
    note: str
    matmul: str = "bf16"   # the dtype whose peak prices a layer's weight matmuls (device time model)
    scores: str = "bf16"   # the dtype of everything else: attention's score matmuls, the head, the rest


@attrs.frozen
class Optimizer:
    """Optimizer states per parameter and their width."""

    name: str
    states: int
    state_bytes: int
    note: str


PRECISIONS: dict[str, Precision] = {p.name: p for p in (
    Precision("bf16-mixed", 2, 4, 4, 0, 2, "bf16 weights and activations, fp32 gradients and master weights"),
    Precision("fp8-mixed", 2, 4, 4, 1, 2,
              "bf16 weights plus a cached fp8 copy, fp32 gradients and master weights; the per-tensor "
              "scaling state (amax history, scales) is a few KiB per layer and not priced", matmul="fp8"),
    Precision("fp32", 4, 4, 0, 0, 4, "fp32 weights, gradients and activations, no master copy",
              matmul="fp32", scores="fp32"),
)}
"""The recipes `--precision` names; the first is the default."""

OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (
    Optimizer("adam", 2, 4, "Adam(W): first and second moments in fp32"),
    Optimizer("sgd-momentum", 1, 4, "SGD with one fp32 momentum buffer"),
    Optimizer("adafactor", 0, 4, "Adafactor without momentum: a row and a column vector per matrix "
                                 "(under 0.1% of the parameters for widths over 2,048), not priced"),
)}
"""The optimizers `--optimizer` names; the first is the default."""

PRECISION_NAMES = tuple(PRECISIONS)
OPTIMIZER_NAMES = tuple(OPTIMIZERS)


@attrs.frozen
class StaticWidths:
    """What one parameter costs in bytes under a precision, an optimizer and the profile's overrides."""

    param: int
    grad: int
    master: int
    extra: int
    states: int
    state_bytes: int

    @property
    def optimizer(self) -> int:
        """Return optimizer bytes per parameter: master copy, extra copies and states."""
        return self.master + self.extra + self.states * self.state_bytes

    @property
    def total(self) -> int:
        """Return bytes per parameter before ZeRO: weights, gradients and optimizer."""
        return self.param + self.grad + self.optimizer


def static_widths(precision: str, optimizer: str, run: object, param_bytes: int | None = None
                  ) -> StaticWidths:
    """Return the per-parameter widths a strategy's precision and optimizer give, the profile's stated facts winning."""
    p, o = PRECISIONS[precision], OPTIMIZERS[optimizer]

    def fact(name: str, default: int) -> int:
        value = getattr(run, name, None)
        return default if value is None else int(value)

    return StaticWidths(param=param_bytes or p.param, grad=fact("grad_bytes", p.grad),
                        master=fact("main_param_bytes", p.master), extra=p.extra,
                        states=fact("optimizer_states", o.states),
                        state_bytes=fact("optimizer_state_bytes", o.state_bytes))
