"""Layer patterns of a config into the per-layer kind list a stack compresses into runs.

The mixer comes from `layer_types` (Nemotron-H's pattern string arrives as one,
hf_hybrid.py), MiMo-V2-Flash's `hybrid_layer_pattern`, Bamba's `attn_layer_indices`, LFM2's
`full_attn_idxs`, Mllama's `cross_attention_layers`, `full_attention_interval`,
`sliding_window_pattern` or the sliding-window rule; the feed-forward from `mlp_layer_types` or a
`moe_layer_freq` list (MiMo-V2-Flash), `decoder_sparse_step`, `mlp_only_layers` or
`moe_layer_freq`; Jamba's period/offset rules pattern both, and a config patterning both
otherwise names each layer's kind MIXER_FFN. All lower to the same run-length stack. The last
`num_kv_shared_layers` layers (Gemma 4) are each KIND_kv_shared: they reuse an earlier layer's keys and
values (the kind's `dims { kv_shared = 1 }`).
"""

from __future__ import annotations

from hpdsl import ast
from hpdsl.importers.hf_config import Config, HfImportError, count, period, shown, whole
from hpdsl.ir.nodes import ProfileIR
from hpdsl.ir.stack import compress_kinds


def stack(kinds: list[str], profile: ProfileIR) -> ast.Stack:
    """Return the explicit stack of a config that says per layer what it is."""
    unknown = sorted(set(kinds) - set(profile.kinds))
    if unknown:
        raise HfImportError(f"the config's layers name {unknown}, which profile "
                            f"'{profile.name}' has no kinds for (it has {', '.join(profile.kinds)})",
                            "layer_types")
    return ast.Stack(compress_kinds(kinds))


KV_SHARED = "kv_shared"
"""The suffix of the kinds of the layers `num_kv_shared_layers` names (the last ones): KIND_kv_shared."""


def layer_kinds(cfg: Config, profile: ProfileIR, layers: int) -> list[str] | None:
    """Return every layer's kind when the config's patterns say it; None to derive the stack.

    The last `num_kv_shared_layers` layers (Gemma 4) are each KIND_kv_shared, a kind the
    profile must have (as transformers' kv_sharing_modes: they reuse the keys and values of
    the last earlier layer of their attention type).
    """
    kinds = _layer_kinds(cfg, profile, layers)
    shared = count(cfg, "num_kv_shared_layers")
    if not shared:
        return kinds
    if shared >= layers:
        raise HfImportError(f"num_kv_shared_layers is {shared}: every layer would reuse an earlier one's keys and "
                            f"values, but the model has {layers} layers; at most {layers - 1} can",
                            "num_kv_shared_layers")
    first = layers - shared
    own = kinds if kinds is not None else [profile.default] * layers
    named = [*own[:first], *(f"{kind}_{KV_SHARED}" for kind in own[first:])]
    missing = sorted(set(named) - set(profile.kinds))
    if missing:
        raise HfImportError(f"num_kv_shared_layers is {shared}, but profile '{profile.name}' has no kinds "
                            f"{', '.join(missing)} for those layers (a kind KIND_{KV_SHARED} with "
                            "`dims { kv_shared = 1 }` per kind they reuse)", "num_kv_shared_layers")
    return named


def _layer_kinds(cfg: Config, profile: ProfileIR, layers: int) -> list[str] | None:
    """Return every layer's kind when the config's patterns say it, before key/value sharing; None to derive.

    The mixer comes from `layer_types`, `full_attention_interval`,
    `sliding_window_pattern` or the sliding-window rule; the feed-forward from
    `decoder_sparse_step`, `mlp_only_layers` or `moe_layer_freq`. All are lowered
    to the same per-layer kind list, which the stack compresses into runs.
    """
    periodic = _period_kinds(cfg, layers)
    if periodic is not None:
        return periodic
    _require_cross_layers(cfg, profile)
    mixers = _mixer_kinds(cfg, layers)
    ffns = _ffn_kinds(cfg, profile, layers)
    if mixers is not None and ffns is None and set(mixers) <= {INDEXED, SHARED_INDEX}:
        first = count(cfg, "first_k_dense_replace") or 0  # the DSA layers' feed-forwards: dense first, then MoE
        ffns = ["dense" if i < first else "moe" for i in range(layers)]
    if mixers is not None and ffns is not None:
        both = [f"{mixer}_{ffn}" for mixer, ffn in zip(mixers, ffns)]
        if set(both) <= set(profile.kinds):  # MiMo-V2-Flash: full_attention_dense, sliding_attention_moe, ...
            return both
        raise HfImportError("the config patterns both the mixers and the feed-forwards, but profile "
                            f"'{profile.name}' has no kinds {', '.join(sorted(set(both) - set(profile.kinds)))} "
                            "(a kind MIXER_FFN per pair)", "layer_types")
    kinds = mixers if mixers is not None else ffns
    if kinds is not None and set(kinds) == {"full_attention"} and "full_attention" not in profile.kinds:
        return None  # every layer is the profile's plain attention layer
    return kinds


def _period_kinds(cfg: Config, layers: int) -> list[str] | None:
    """Return Jamba's kinds, MIXER_FFN per layer, from its period/offset rules; None without them.

    Layer i attends when i % attn_layer_period == attn_layer_offset (else it is a
    Mamba layer) and routes through experts when i % expert_layer_period ==
    expert_layer_offset (else dense), as JambaConfig's layers_block_type and
    layers_num_experts say.
    """
    if cfg.get("attn_layer_period") is None and cfg.get("expert_layer_period") is None:
        return None
    rules = {}
    for rule in ("attn_layer", "expert_layer"):
        period = whole(cfg.required(f"{rule}_period"), f"{rule}_period")
        offset = whole(cfg.required(f"{rule}_offset"), f"{rule}_offset", "first_k_dense")
        if offset >= period:
            raise HfImportError(f"{rule}_offset is {offset}; it must be below {rule}_period {period}",
                                f"{rule}_offset")
        rules[rule] = (period, offset)
    (a_period, a_offset), (e_period, e_offset) = rules["attn_layer"], rules["expert_layer"]
    experts = cfg.get("num_experts")
    routed = experts is not None and not isinstance(experts, bool) and experts not in (0, 1)
    return [("attention" if i % a_period == a_offset else "mamba")
            + ("_moe" if routed and i % e_period == e_offset else "_dense") for i in range(layers)]


DSA_LAYER_TYPES = frozenset({"deepseek_sparse_attention", "indexed_attention"})
"""The layer_types transformers writes for a DSA model (GlmMoeDsaConfig, 5.11 and 5.24): every layer the same;
which layers run their own indexer is indexer_types' to say."""


def _mixer_kinds(cfg: Config, layers: int) -> list[str] | None:
    rotary = _rope_kinds(cfg, layers)
    if rotary is not None:  # Llama 4: layer_types, where stated, is derived from these (Llama4TextConfig)
        return rotary
    types = cfg.get("layer_types")
    if isinstance(types, list) and types and not set(map(str, types)) <= DSA_LAYER_TYPES:
        if len(types) < layers:
            raise HfImportError(f"layer_types lists {len(types)} layers, but num_hidden_layers "
                                f"is {layers}", "layer_types")
        return [str(t) for t in types[:layers]]
    pattern = cfg.get("hybrid_layer_pattern")
    if isinstance(pattern, list) and pattern:  # MiMo-V2-Flash: 0 full attention, 1 sliding window
        return _listed(pattern, layers, "hybrid_layer_pattern", {0: "full_attention", 1: "sliding_attention"})
    ratios = cfg.get("compress_ratios")
    if isinstance(ratios, list) and ratios:  # DeepSeek-V4: 0 sliding only, 4 CSA, 128 HCA (DeepseekV4Config's map)
        return _listed(ratios, layers, "compress_ratios", COMPRESS_RATIO_KINDS)
    indices = cfg.get("attn_layer_indices")
    if isinstance(indices, list):  # Bamba: attention at these layers, Mamba-2 elsewhere
        return ["full_attention" if i in indices else "linear_attention" for i in range(layers)]
    indices = cfg.get("full_attn_idxs")
    if isinstance(indices, list):  # LFM2 (no layer_types): attention at these layers, short convolutions elsewhere
        return ["full_attention" if i in indices else "conv" for i in range(layers)]
    indexed = _indexer_kinds(cfg, layers)
    if indexed is not None:  # GLM-5.2: a DSA indexer of its own ("full") or the previous one's choice ("shared")
        return indexed
    crossing = _cross_layers(cfg, layers)
    if crossing is not None:  # Mllama: cross-attention layers at these, self-attention elsewhere
        return ["cross_attention" if i in crossing else "full_attention" for i in range(layers)]
    interval = count(cfg, "full_attention_interval")
    if interval:
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(layers)]
    if cfg.get("sliding_window") is None or cfg.get("use_sliding_window") is False:
        return None
    pattern = count(cfg, "sliding_window_pattern") or count(cfg, "_sliding_window_pattern")
    if pattern:  # Gemma: every pattern-th layer attends to the whole sequence
        return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    first = count(cfg, "max_window_layers") if cfg.get("use_sliding_window") else 0
    return ["sliding_attention" if i >= (first or 0) else "full_attention" for i in range(layers)]


ROPE, NOPE = "rope_attention", "nope_attention"
"""The mixer half of a Llama 4 layer's kind: attention that turns its heads with the rotary embedding, or none."""


def _rope_kinds(cfg: Config, layers: int) -> list[str] | None:
    """Return each layer's rotary or no-position attention as Llama4TextConfig reads it; None without the keys.

    `no_rope_layers` (1: the layer turns rotary dims, 0: none), else layer i has no
    position where (i + 1) is a multiple of `no_rope_layer_interval`.
    """
    stated = cfg.get("no_rope_layers")
    if stated is not None and not isinstance(stated, list):
        raise HfImportError(f"no_rope_layers is {shown(stated)}; expected a list of 1 (rotary) or 0 (no position) "
                            "per layer", "no_rope_layers")
    if stated:  # an empty list is Llama4TextConfig's default: the interval's
        return _listed(stated, layers, "no_rope_layers", {1: ROPE, 0: NOPE})
    interval = period(cfg, "no_rope_layer_interval")
    if not interval:
        return None
    return [NOPE if (i + 1) % interval == 0 else ROPE for i in range(layers)]


COMPRESS_RATIO_KINDS: dict[object, str] = {0: "sliding_attention", 4: "compressed_sparse_attention",
                                            128: "heavily_compressed_attention"}
"""DeepSeek-V4's legacy compress_ratios, per layer, as DeepseekV4Config reads them into layer_types (the rates
themselves are compress_rates', 4 and 128 by default)."""


HASH_MOE = "hash_moe"
"""The feed-forward half of a DeepSeek-V4 layer's kind whose experts a token-id lookup picks (num_hash_layers)."""


INDEXED, SHARED_INDEX = "indexed", "shared_index"
"""The mixer half of a DSA layer's kind: its own lightning indexer, or the previous indexed layer's selection."""


def _indexer_kinds(cfg: Config, layers: int) -> list[str] | None:
    """Return each layer's DSA mixer as GlmMoeDsaConfig reads it; None when every layer has its own indexer.

    `indexer_types` ("full" or "shared" per layer), else `index_topk_pattern` ("F"/"S"
    per layer), else layer i is full where max(i − index_skip_topk_offset + 1, 0) is a
    multiple of index_topk_freq (defaults 2 and 1: every layer full).
    """
    codes: dict[object, str] = {"full": INDEXED, "shared": SHARED_INDEX}
    stated = cfg.get("indexer_types")
    if isinstance(stated, list) and stated:
        kinds = _listed(stated, layers, "indexer_types", codes)
    elif isinstance(cfg.get("index_topk_pattern"), str):
        kinds = _listed(list(cfg.get("index_topk_pattern")), layers, "index_topk_pattern",
                        {"F": INDEXED, "S": SHARED_INDEX})
    elif cfg.get("index_topk_freq") is not None:
        freq = whole(cfg.get("index_topk_freq"), "index_topk_freq")
        offset = cfg.get("index_skip_topk_offset")
        offset = 2 if offset is None else whole(offset, "index_skip_topk_offset", "first_k_dense")
        kinds = [INDEXED if max(i - offset + 1, 0) % freq == 0 else SHARED_INDEX for i in range(layers)]
    else:
        return None
    return None if set(kinds) == {INDEXED} else kinds


def _require_cross_layers(cfg: Config, profile: ProfileIR) -> None:
    """Refuse a config priced by a profile with cross-attention kinds that does not say where they stand.

    MllamaTextConfig fills an absent cross_attention_layers with [3, 8, ..., 38]
    (its __post_init__); a `default` rule holds no list, so the config must state it.
    """
    if cfg.get("cross_attention_layers") is not None:
        return
    crossing = sorted(name for name, kind in profile.kinds.items() if kind.attention == "cross")
    if crossing:
        raise HfImportError(f"the config states no cross_attention_layers, which place profile "
                            f"'{profile.name}''s {', '.join(crossing)} layers (MllamaTextConfig would take "
                            "[3, 8, 13, 18, 23, 28, 33, 38]); state the list in the config",
                            "cross_attention_layers")


def _cross_layers(cfg: Config, layers: int) -> frozenset[int] | None:
    """Return the layers `cross_attention_layers` makes cross-attention layers; None when the config lists none."""
    indices = cfg.get("cross_attention_layers")
    return None if indices is None else _layer_numbers(indices, layers, "cross_attention_layers")


def _layer_numbers(values: object, layers: int, key: str) -> frozenset[int]:
    """Return the layer numbers a list key names, each refused unless a layer of the model's."""
    if not isinstance(values, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in values):
        raise HfImportError(f"{key} is {shown(values)}; expected a list of layer numbers", key)
    outside = sorted(i for i in values if not 0 <= i < layers)
    if outside:
        raise HfImportError(f"{key} names layers {outside}, outside the model's {layers} (0 to {layers - 1})", key)
    return frozenset(values)


def _listed(values: list[object], layers: int, key: str, kinds: dict[object, str]) -> list[str]:
    """Return each layer's kind from a per-layer list of codes (`kinds`: code → kind)."""
    if len(values) < layers:
        raise HfImportError(f"{key} lists {len(values)} layers, but num_hidden_layers is {layers}", key)
    unknown = sorted({shown(v) for v in values[:layers]
                      if isinstance(v, bool) or not isinstance(v, (int, str)) or v not in kinds})
    if unknown:
        raise HfImportError(f"{key} holds {', '.join(unknown)}; expected one of "
                            f"{', '.join(map(shown, kinds))} per layer", key)
    return [kinds[v] for v in values[:layers]]


def _ffn_kinds(cfg: Config, profile: ProfileIR, layers: int) -> list[str] | None:
    listed = next(((key, cfg.get(key)) for key in ("mlp_layer_types", "moe_layer_freq")
                   if isinstance(cfg.get(key), list) and cfg.get(key)), None)
    if listed is not None:  # MiMo-V2-Flash: per layer "dense"/"sparse", or 0 dense / 1 MoE
        key, values = listed
        # MiMo-V2-Flash's "dense"/"sparse"; DeepSeek-V4's "moe"/"hash_moe" (hash-routed experts), for a profile
        # with hash-routed kinds (MIXER_hash_moe: profiles/deepseek_v4.hpf)
        hashed = any(kind.endswith(HASH_MOE) for kind in profile.kinds)
        codes: dict[object, str] = {0: "dense", 1: "moe"} if key != "mlp_layer_types" else \
            {"moe": "moe", HASH_MOE: HASH_MOE} if hashed else {"dense": "dense", "sparse": "moe"}
        return _listed(values, layers, key, codes)
    hashed = cfg.get("num_hash_layers")
    if hashed is not None:  # DeepSeek-V4: the first num_hash_layers layers route by token id (DeepseekV4Config)
        first = min(whole(hashed, "num_hash_layers", "first_k_dense"), layers)
        return [HASH_MOE] * first + ["moe"] * (layers - first)
    moe_layers = cfg.get("moe_layers")
    if moe_layers is not None:  # Llama 4: the MoE layers by number, the others dense
        routed = _layer_numbers(moe_layers, layers, "moe_layers")
        return ["moe" if i in routed else "dense" for i in range(layers)]
    # Llama 4's interleave_moe_layer_step is Qwen-MoE's decoder_sparse_step: every step-th layer routes
    step = count(cfg, "decoder_sparse_step") or period(cfg, "interleave_moe_layer_step") or 1
    freq = count(cfg, "moe_layer_freq") or 1
    mlp_only = cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list):
        raise HfImportError(f"mlp_only_layers is {shown(mlp_only)}; expected a list of layer numbers",
                            "mlp_only_layers")
    if step == 1 and freq == 1 and not mlp_only:
        return None
    field = "mlp_only_layers" if mlp_only else ("moe_layer_freq" if step == 1 else "decoder_sparse_step"
                                                if cfg.get("decoder_sparse_step") else "interleave_moe_layer_step")
    paired = any(kind.endswith("_moe") for kind in profile.kinds)  # MIXER_FFN kinds: _layer_kinds checks each
    if not {"dense", "moe"} <= set(profile.kinds) and not paired:
        raise HfImportError(f"{field} makes some layers dense, but profile '{profile.name}' has "
                            "no dense and moe kinds to say so", field)
    first = count(cfg, "first_k_dense_replace") or 0
    return ["dense" if i in mlp_only or (i + 1) % step or i < first or (i - first) % freq else "moe"
            for i in range(layers)]


__all__ = ["KV_SHARED", "layer_kinds", "stack"]
