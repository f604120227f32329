"""LFM2's keys (Lfm2Config): the short-convolution mixer and the adjusted feed-forward width.

Two built-in reads (hpdsl/importers/rules.py BUILTIN_READS), enabled by a profile's
`read` rule (profiles/lfm2.hpf). `conv_L_cache` and `conv_bias` state the
short_conv family's `ssm { }` block: no state (ssm_state 0, no scan) at hidden width
(ssm_expand 1). `block_auto_adjust_ff_dim` with `block_ffn_dim_multiplier` and
`block_multiple_of` is Lfm2MLP's width: ⌊⌊2·I/3⌋·m⌋ rounded up to a multiple, a
floor and a rounding that the `derive` rule's dims (`+ * /`, whole values only) do
not express.
"""

from __future__ import annotations

import math
from typing import Any

from hpdsl import ast
from hpdsl.importers.hf_config import Config, HfImportError, field_item, flag, whole
from hpdsl.importers.rules import Rules

CONV_KEYS = ("conv_L_cache", "conv_bias")
"""The keys of a short-convolution config's mixer."""

WIDTH_KEYS = ("block_auto_adjust_ff_dim", "block_ffn_dim_multiplier", "block_multiple_of")
"""The keys of Lfm2MLP's width adjustment."""


def short_conv_block(cfg: Config, rules: Rules) -> ast.Block | None:
    """Return the `ssm { }` block of a short-convolution mixer, or None unless the profile reads conv_L_cache."""
    if "conv_L_cache" not in rules.reads or cfg.get("conv_L_cache") is None:
        return None
    values: dict[str, Any] = {"ssm_state": 0, "ssm_conv": whole(cfg.get("conv_L_cache"), "conv_L_cache", "ssm_conv"),
                              "ssm_expand": 1}
    if cfg.get("conv_bias") is not None:
        values["ssm_conv_bias"] = flag(cfg.get("conv_bias"), "conv_bias")
    return ast.Block(ast.Name("ssm"), tuple(field_item(k, v) for k, v in values.items()))


def adjusted_width(cfg: Config, rules: Rules, width: int | None) -> int | None:
    """Return Lfm2MLP's feed-forward width from the stated one, as transformers computes it."""
    if "block_auto_adjust_ff_dim" not in rules.reads or width is None:
        return width
    if not flag(cfg.get("block_auto_adjust_ff_dim", False), "block_auto_adjust_ff_dim"):
        return width
    width = int(2 * width / 3)
    multiplier = cfg.get("block_ffn_dim_multiplier")
    if multiplier is None:
        return width
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or not math.isfinite(multiplier) \
            or multiplier <= 0:
        raise HfImportError(f"block_ffn_dim_multiplier is {multiplier!r}; expected a positive number",
                            "block_ffn_dim_multiplier")
    multiple = whole(cfg.get("block_multiple_of", 256), "block_multiple_of")
    width = int(multiplier * width)
    return multiple * ((width + multiple - 1) // multiple)


__all__ = ["CONV_KEYS", "WIDTH_KEYS", "adjusted_width", "short_conv_block"]
