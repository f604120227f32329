"""A layer's wiring into its norms: which norms it holds, where each stands, where the residual adds go.

A layer's blocks are its mixer, the decoder's cross-attention and its
feed-forward. The model's `wiring` field (hpdsl/model/fields.py, stated in a
model or in a profile's facts; docs/language.md#block-wiring) says how they
meet the residual stream:

- pre_norm: x + block(norm(x)) for each block in turn (Llama);
- sandwich: x + post(block(norm(x))), a norm before and after each (Gemma);
- sublayer_post_norm: x + post(block(x)), the norm after the block, before the add (OLMo-2/3, EXAONE-4);
- post_norm: post(x + block(x)), the norm after the residual add (BERT, OPT);
- parallel: x + mixer(n) + ffn(n) with n = norm(x), one norm for both (GPT-J, Phi);
- parallel_two_norms: x + mixer(norm(x)) + ffn(norm'(x)), a norm each (GPT-NeoX, Falcon-40B);
- gated: x + tanh(g)·block(norm(x)), pre_norm with a learnt scalar gate on each block's output
  (Mllama's cross-attention layers; the gates are `gate` slots, families/tanh_gate.hpf).

A kind with `attention cross` holds the cross-attention as its one attention: its
blocks are the cross-attention and the feed-forward (`cross=True` below).

`norm_paths` is the one answer every consumer reads: the layer's slots
(hpdsl/bound/slots.py, hence the torch builder and the parameter count), the
norm-count check (hpdsl/bound/shape.py) and the saved activations
(hpdsl/cost/formulas/memory.py). Nothing here imports torch.
"""

from __future__ import annotations

from hpdsl.model.fields import WIRINGS

PARALLEL = frozenset({"parallel", "parallel_two_norms"})
"""The wirings whose mixer and feed-forward read the same input and add to one residual."""

POST = frozenset({"sandwich", "sublayer_post_norm", "post_norm"})
"""The wirings with a norm after each block."""

PRE = frozenset({"pre_norm", "sandwich"})
"""The sequential wirings with a norm before each block."""


def blocks(attentions: int, ffn: bool, *, cross: bool = False) -> tuple[str, ...]:
    """Return a layer's blocks in order: the mixer, the cross-attention (a decoder's, or a cross kind's), the feed-forward."""
    if cross:  # `attention cross`: the one attention reads a given stream
        return (("cross",) if attentions else ()) + (("ffn",) if ffn else ())
    return (("mixer",) if attentions else ()) + (("cross",) if attentions == 2 else ()) + (("ffn",) if ffn else ())


def gate_paths(wiring: str, attentions: int, ffn: bool, *, cross: bool = False) -> tuple[tuple[str, str], ...]:
    """Return (block, gate path) for every output gate a layer wired `wiring` holds: one per block when gated."""
    if wiring != "gated":
        return ()
    return tuple((block, f"{block}_gate") for block in blocks(attentions, ffn, cross=cross))


def norm_paths(wiring: str, attentions: int, ffn: bool, *, cross: bool = False) -> tuple[tuple[str, str], ...]:
    """Return (block, norm path) for every norm a layer wired `wiring` holds, in the order it runs them."""
    held = blocks(attentions, ffn, cross=cross)
    if wiring == "parallel" and parallel_fits(attentions, ffn, cross=cross):
        return (("mixer", "mixer_norm"),)
    # A parallel wiring on a layer that is not a mixer beside a feed-forward is refused
    # (hpdsl/bound/shape.py, wiring-mismatch); its blocks are still each behind a norm.
    paths: list[tuple[str, str]] = []
    for block in held:
        if wiring in PRE or wiring in PARALLEL or wiring == "gated":
            paths.append((block, f"{block}_norm"))
        if wiring in POST:
            paths.append((block, f"{block}_post_norm"))
    return tuple(paths)


def parallel_fits(attentions: int, ffn: bool, *, cross: bool = False) -> bool:
    """Whether a layer can be wired parallel: one self-attending mixer and a feed-forward, side by side."""
    return attentions == 1 and ffn and not cross


def describe(wiring: str, attentions: int, ffn: bool, *, cross: bool = False) -> str:
    """Return the norms a layer wired `wiring` holds, in words, for a diagnostic."""
    if wiring == "parallel":
        return "one before the mixer and feed-forward, which run side by side (wiring parallel)"
    where = {"pre_norm": "before", "sandwich": "before and one after", "sublayer_post_norm": "after",
             "post_norm": "after the residual add of", "parallel_two_norms": "before", "gated": "before"}[wiring]
    names = {"mixer": "the attention", "cross": "the cross-attention", "ffn": "the feed-forward"}
    parts = [f"one {where} {names[block]}" for block in blocks(attentions, ffn, cross=cross)]
    return ", ".join(parts) + f" (wiring {wiring})"


def wiring_for_count(count: int, attentions: int, ffn: bool, *, cross: bool = False) -> tuple[str, ...]:
    """Return the wirings under which a layer of these blocks holds `count` norms."""
    fits = [w for w in WIRINGS if len(norm_paths(w, attentions, ffn, cross=cross)) == count]
    return tuple(w for w in fits if w not in PARALLEL or parallel_fits(attentions, ffn, cross=cross))


__all__ = ["PARALLEL", "POST", "PRE", "blocks", "describe", "gate_paths", "norm_paths", "parallel_fits",
           "wiring_for_count"]
