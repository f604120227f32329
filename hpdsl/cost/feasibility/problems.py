"""The reasons a strategy cannot run a model, as coded problems: one stable code each, the message its text.

Like the checker's diagnostics (hpdsl/diagnostics/codes.py), a problem's code
names what is wrong and stays stable, while the message says what was found and
what was expected; every check collects all of them and raises once
(InvalidStrategyError carries the problems and, for the messages' readers,
their texts as `reasons`).
"""

from __future__ import annotations

import attrs

from hpdsl.errors import InputError

PROBLEMS: dict[str, str] = {
    "past-bound": "a number is past what the pricing's 64-bit arithmetic can hold (hpdsl/cost/facts/bounds.py)",
    "not-positive": "a degree, size or width that must be at least 1 is not",
    "width-not-positive": "a stated byte width is negative (0 means the precision's)",
    "unknown-precision": "the precision is not one of hpdsl/cost/facts/precision.py's",
    "unknown-optimizer": "the optimizer is not one of hpdsl/cost/facts/precision.py's",
    "unknown-impl": "the implementation is not one of IMPLS",
    "unknown-recompute": "the recompute choice is not one of RECOMPUTE",
    "unknown-zero": "the ZeRO level is not one of ZERO",
    "unknown-cp-kind": "the context-parallel kind is not one of CP_KINDS",
    "unknown-device": "the device is neither shipped (devices/*.hpf) nor a .hpf file declaring one",
    "mfu-range": "the MFU is outside [MIN_MFU, 1] and not 0 (the device time model)",
    "recompute-layers-negative": "recompute_layers is negative",
    "device-count-mismatch": "dp·tp·pp·cp is not the job's device count",
    "devices-not-divided": "a degree does not divide the job's device count",
    "expert-mesh": "ep·etp does not divide dp·cp·tp, the devices of a stage's expert layers",
    "global-batch-multiple": "the global batch is not a multiple of micro_batch·dp",
    "vpp-without-pp": "virtual stages without pipeline parallelism",
    "interleaved-micro-batches": "the interleaved schedule's micro-batches are not a multiple of pp",
    "ring-seq-len": "ring attention needs the sequence divisible by 2·cp",
    "a2a-seq-len": "all-to-all context parallelism needs the sequence divisible by cp",
    "too-many-chunks": "more pipeline chunks (pp·vpp) than layers",
    "split-length": "pp_split does not list pp·vpp chunks",
    "split-sum": "pp_split does not sum to the model's layers",
    "split-negative": "pp_split has a negative layer count",
    "tp-heads": "tp does not divide a head count",
    "tp-width": "tp does not divide a dense or shared-expert width",
    "etp-width": "etp does not divide the expert width",
    "a2a-heads": "all-to-all context parallelism needs tp·cp to divide the heads",
    "a2a-cp-heads": "all-to-all context parallelism needs cp to divide a tp-replicated mixer's heads",
    "cp-conv-tail": "a context-parallel Gated DeltaNet's chunk is shorter than its conv tail",
    "ep-experts": "ep does not divide the routed experts",
    "moe-needs-sp": "a MoE model with tp > 1 needs sequence parallelism",
    "no-experts": "ep or etp above 1 for a model without routed experts",
    "family-require": "a family's require refuses the parallel layout",
}
"""Every problem code, with what it means."""


@attrs.frozen
class Problem:
    """One reason a strategy cannot run a model: a code of PROBLEMS and the message that says it."""

    code: str
    message: str

    def __str__(self) -> str:
        return self.message


@attrs.frozen(auto_exc=True)
class InvalidStrategyError(InputError):
    """A strategy cannot run the model (or a search cannot run): carries every reason, coded where it is one."""

    reasons: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
