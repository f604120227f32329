"""Per-layer head shapes a config lists, read into the fields the kinds' dims read.

Laguna's `num_attention_heads_per_layer` (the sliding-window layers' count: `sliding_heads`) and
transformers 5.24's `per_layer_config` table (Gemma 4's full layers' head dim and kv heads:
`global_head_dim`, `global_kv_heads`). A kind's `dims { }` sets its layers' shapes from these
fields (docs/language.md, "Kind dims"), so every layer of a kind must have one shape: a list that
says otherwise is refused naming the layers.
"""

from __future__ import annotations

from hpdsl.importers.hf_config import Config, HfImportError, shown
from hpdsl.ir.nodes import ProfileIR


def per_layer_heads(cfg: Config, profile: ProfileIR, kinds: list[str] | None, layers: int,
                    heads: int) -> dict[str, int]:
    """Return `sliding_heads` from `num_attention_heads_per_layer` (Laguna); nothing without the key.

    The sliding-window layers (the profile's kinds with `attention sliding`) must share one
    count, and every other layer must have num_attention_heads: a kind's dims set its layers'
    heads, so a count per layer beyond that is refused naming the layers.
    """
    key = "num_attention_heads_per_layer"
    listed = cfg.get(key)
    if listed is None:
        return {}
    if not isinstance(listed, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                               for n in listed):
        raise HfImportError(f"{key} is {shown(listed)}; expected a head count per layer", key)
    if len(listed) != layers:
        raise HfImportError(f"{key} lists {len(listed)} layers, but num_hidden_layers is {layers}", key)
    windowed = _sliding(profile, kinds, layers)
    found = sorted({n for n, sliding in zip(listed, windowed, strict=True) if sliding})
    odd = [i for i, (n, sliding) in enumerate(zip(listed, windowed, strict=True)) if not sliding and n != heads]
    if odd or len(found) > 1:
        raise HfImportError(f"{key} gives layers {odd} other head counts than num_attention_heads {heads}"
                            if odd else f"{key} gives the sliding-window layers several head counts {found}",
                            key)
    return {"sliding_heads": found[0]} if found else {}


PER_LAYER_SHAPES = {"head_dim": "global_head_dim", "num_key_value_heads": "global_kv_heads"}
"""What transformers 5.24's per_layer_config may set per layer (Gemma 4), and the field a kind's dims read it from."""


def per_layer_shapes(cfg: Config, profile: ProfileIR, kinds: list[str] | None, layers: int,
                     base: dict[str, int]) -> dict[str, int]:
    """Return global_head_dim and global_kv_heads from `per_layer_config` (Gemma 4 saved by transformers 5.24).

    The table gives a layer number its own head_dim and num_key_value_heads; the sliding-window
    layers must keep the model's (`base`: the config's head_dim and num_key_value_heads), and
    every other layer must share one shape, the one the full-attention kinds read.
    """
    key = "per_layer_config"
    table = cfg.get(key)
    if table is None:
        return {}
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()) \
            or not all(str(k).isdigit() and int(k) < layers for k in table):
        raise HfImportError(f"{key} is {shown(table)}; expected a table of layer numbers (0 to {layers - 1}) "
                            "to their attention shapes", key)
    odd = sorted({name for entry in table.values() for name in entry} - set(PER_LAYER_SHAPES))
    if odd:
        raise HfImportError(f"{key} sets {', '.join(odd)} per layer; hpdsl reads "
                            f"{' and '.join(PER_LAYER_SHAPES)} there (a kind's dims)", key)
    entries = {int(k): v for k, v in table.items()}
    windowed = _sliding(profile, kinds, layers)
    shapes = [tuple(entries.get(i, {}).get(name, base[name]) for name in PER_LAYER_SHAPES) for i in range(layers)]
    own = tuple(base[name] for name in PER_LAYER_SHAPES)
    moved = [i for i, sliding in enumerate(windowed) if sliding and shapes[i] != own]
    full = sorted({shape for shape, sliding in zip(shapes, windowed, strict=True) if not sliding})
    if moved or len(full) > 1:
        raise HfImportError(f"{key} gives the sliding-window layers {moved} other shapes than the model's"
                            if moved else f"{key} gives the other layers several shapes {full}; their kinds "
                            "read one", key)
    return dict(zip(PER_LAYER_SHAPES.values(), full[0], strict=True)) if full else {}


def _sliding(profile: ProfileIR, kinds: list[str] | None, layers: int) -> list[bool]:
    """Return whether each layer's kind attends through a sliding window (no kinds: every layer the default's)."""
    return [k in profile.kinds and profile.kinds[k].attention == "sliding" for k in kinds or [""] * layers]


__all__ = ["PER_LAYER_SHAPES", "per_layer_heads", "per_layer_shapes"]
