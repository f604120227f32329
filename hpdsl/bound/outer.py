"""The model's outer wiring, checked: what the embedding side and the head side of a model may state together.

The outer wiring (hpdsl/bound/slots.py `end_slots`: embed_width's project_in and
project_out, embed_norm, position_offset, no_final_norm) and the attention's
position scheme (alibi, no_rope) are model fields (fields/model.hpf). A
combination the builder has no place for, or one that would price something
that does not exist, is a located diagnostic (hpdsl/bound/shape.py reports these
with the layer problems; docs/language.md, "The model's outer wiring").
"""

from __future__ import annotations

from collections.abc import Iterator
from hpdsl.bound.problem import LayerProblem
from hpdsl.ir.nodes import ModelIR

OUTER_FIELDS = ("embed_width", "embed_norm", "no_final_norm", "position_offset", "hc_mult")
"""The fields that change the model's two ends (hc_mult, DeepSeek-V4's residual streams, its layers' too)."""


def stated_outer(model: ModelIR) -> list[str]:
    """Return the outer-wiring fields `model` states with an effect (an embed_width equal to hidden has none)."""
    return [name for name in OUTER_FIELDS
            if getattr(model, name) not in (None, False, 0) and not (name == "embed_width" and
                                                                     model.embed_width == model.hidden)]


def outer_problems(model: ModelIR, *, encoder_decoder: bool) -> Iterator[LayerProblem]:
    """Yield every outer-wiring statement the model's other statements contradict."""
    if model.position_offset and not model.learned_positions:
        yield LayerProblem("outer-wiring", f"position_offset {model.position_offset} offsets a learned position "
                           "table, but the model has none (learned_positions is not set)",
                           "state `learned_positions true` (and max_positions), or remove position_offset",
                           field="position_offset")
    if model.alibi and model.position_buckets:
        yield LayerProblem("outer-wiring", "alibi biases the scores by distance, and position_buckets adds a "
                           "learned relative bias too: a model has one position bias",
                           "remove position_buckets (ALiBi, BLOOM) or alibi (T5's buckets)", field="alibi")
    outer = stated_outer(model)
    if encoder_decoder and outer:
        yield LayerProblem("outer-wiring", f"an encoder-decoder states {', '.join(outer)}, which its shared "
                           "embedding and two towers have no place for (only a decoder-only model builds them)",
                           f"remove {', '.join(outer)} from the encoder-decoder", field=outer[0])
    if model.mtp and "embed_width" in outer:
        yield LayerProblem("outer-wiring", f"embed_width {model.embed_width} makes the token table narrower than "
                           f"hidden {model.hidden}, but an MTP layer reads the table's rows as hidden-wide inputs",
                           "remove embed_width (or mtp): MTP layers take hidden-wide embeddings",
                           field="embed_width")
    if model.hc_mult and model.mtp:
        yield LayerProblem("outer-wiring", f"hc_mult {model.hc_mult} makes the residual stream {model.hc_mult} "
                           "streams, but an MTP layer reads and writes one hidden-wide stream",
                           "remove mtp (transformers' DeepSeek-V4 builds no MTP layer) or hc_mult", field="hc_mult")
    if model.hc_mult and (model.wiring or "pre_norm") != "pre_norm":
        yield LayerProblem("outer-wiring", f"hc_mult {model.hc_mult} runs each block behind a hyper-connection and "
                           f"a norm before it, but the model states wiring {model.wiring}",
                           "remove the wiring (hyper-connections are pre_norm: DeepSeek-V4's) or hc_mult",
                           field="hc_mult")


__all__ = ["OUTER_FIELDS", "outer_problems", "stated_outer"]
