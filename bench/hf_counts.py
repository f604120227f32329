"""transformers' parameter counts of the published configs in tests/data/hf/, on the meta device.

For each file tests/importers/hf_configs.py FILES names, transformers builds the model from the
config (AutoConfig.for_model; `quantization_config` left out, it changes no count) on the meta
device and counts its language model: every parameter for a causal or seq2seq model; for a
vision-language or audio-language one ("vl") those under `model.language_model.` (`language_model.`: Llama 4) and the output
head, the vision or audio tower and projector left out (hpdsl prices a composite config as its text model). A "vl" file
also gets `text_total`/`text_active`: the count of transformers' text model class alone
(AutoModelForCausalLM of its text_config, the head tied as the outer config ties it, as the
composite model does), which the importer's estimate is held to. For MoE the active count is
the total less the routed experts' share not chosen per token (top-k of n).
A model_type the installed transformers lacks is skipped and said so. Prints a table and writes
tests/data/hf/counts.json (the transformers version in it), which
tests/importers/test_published_architectures.py compares `hpdsl estimate --json` with.

    .venv/bin/python bench/hf_counts.py [--check]   # --check: compare with counts.json, write nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COUNTS = ROOT / "tests" / "data" / "hf" / "counts.json"
STORAGE_ONLY = ("quantization_config",)
"""Keys transformers would act on at load time but that change no parameter count."""


def _language_params(model: Any, how: str) -> dict[str, Any]:
    """Return the language model's named parameters (tied weights once)."""
    params = dict(model.named_parameters())
    if how != "vl":
        return params
    # Most composites keep model.language_model. beside lm_head.; Llama 4's keeps a whole causal LM, language_model.
    prefixes = ("model.language_model.", "lm_head.", "language_model.")
    return {n: p for n, p in params.items() if n.startswith(prefixes)}


def hf_model(config: dict[str, Any], how: str) -> Any:
    """Return transformers' model of a published config, built on the meta device."""
    import torch
    import transformers

    values = {k: v for k, v in config.items() if k not in STORAGE_ONLY}
    hf_config = transformers.AutoConfig.for_model(**values)
    auto = {"causal": transformers.AutoModelForCausalLM, "seq2seq": transformers.AutoModelForSeq2SeqLM,
            "vl": transformers.AutoModelForImageTextToText}[how]
    if how == "vl" and type(hf_config) not in auto._model_mapping:  # an audio-language model (Voxtral)
        auto = transformers.AutoModelForMultimodalLM
    with torch.device("meta"):
        return auto.from_config(hf_config)


def hf_text_model(config: dict[str, Any]) -> Any:
    """Return transformers' text model class built from a composite config's text_config, on the meta device.

    The head is tied as the outer config says (its stated flag, else its config class's
    default), as the composite model ties it, whatever text_config says. None where transformers
    has no causal LM class for the text config (Qwen3-VL's qwen3_vl_text): the composite's own
    language model count is then the one.
    """
    import torch
    import transformers

    values = {k: v for k, v in config.items() if k not in STORAGE_ONLY}
    outer = transformers.AutoConfig.for_model(**values)
    text = outer.get_text_config()
    causal = transformers.AutoModelForCausalLM
    # Mllama maps its outer config to its text model class (MllamaForCausalLM), not its text config.
    chosen = text if type(text) in causal._model_mapping else outer
    if type(chosen) not in causal._model_mapping:
        return None
    text.tie_word_embeddings = getattr(outer, "tie_word_embeddings", getattr(text, "tie_word_embeddings", False))
    with torch.device("meta"):
        return causal.from_config(chosen)


def _counts(params: dict[str, Any], config: dict[str, Any]) -> tuple[int, int | None]:
    """Return (total, active) of named parameters; active is None for a dense model."""
    total = sum(p.numel() for p in params.values())
    text = config.get("text_config", config)
    experts = text.get("num_experts") or text.get("num_local_experts") or text.get("n_routed_experts")
    if not experts:
        return total, None
    top_k = text.get("num_experts_per_tok") or text["top_k_experts"]  # Gemma 4's key: top_k_experts
    # Routed experts: `mlp.experts.*` (shared experts are `shared_expert(s)`, never `.experts.`).
    routed = sum(p.numel() for name, p in params.items() if ".experts." in name)
    return total, total - routed + routed * top_k // experts


def hf_counts(config: dict[str, Any], how: str) -> tuple[int, int | None]:
    """Return (total, active) parameters of the language model; active is None for a dense model."""
    return _counts(_language_params(hf_model(config, how), how), config)


def hf_text_counts(config: dict[str, Any]) -> tuple[int, int | None] | None:
    """Return (total, active) parameters of a composite config's text model class alone (None: no such class)."""
    model = hf_text_model(config)
    return None if model is None else _counts(dict(model.named_parameters()), config)


def count_all() -> dict[str, Any]:
    """Return counts.json's content: the transformers version and each file's counts or why it has none."""
    import transformers

    sys.path.insert(0, str(ROOT))
    from tests.importers.hf_configs import FILES, published

    counts: dict[str, Any] = {}
    for name, (_, how) in sorted(FILES.items()):
        config = published(name)
        model_type = config.get("model_type")
        if model_type not in transformers.CONFIG_MAPPING:
            counts[name] = {"skipped": f"transformers {transformers.__version__} has no model_type {model_type!r}"}
            continue
        total, active = hf_counts(config, how)
        counts[name] = {"total": total, "active": total if active is None else active}
        text_counts = hf_text_counts(config) if how == "vl" else None
        if text_counts is not None:
            text_total, text_active = text_counts
            counts[name].update(text_total=text_total, text_active=text_total if text_active is None else text_active)
    return {"transformers": transformers.__version__, "counts": counts}


def main(argv: list[str] | None = None) -> int:
    """Print the table; write counts.json, or with --check compare with it (exit 1 on a difference)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with counts.json; write nothing")
    args = parser.parse_args(argv)
    result = count_all()
    print(f"transformers {result['transformers']}")
    print(f"{'config':<26} {'total':>16} {'active':>16}")
    for name, row in result["counts"].items():
        if "skipped" in row:
            print(f"{name:<26} {'skipped: ' + row['skipped']}")
        else:
            text = f"  text {row['text_total']:,} / {row['text_active']:,}" if "text_total" in row else ""
            print(f"{name:<26} {row['total']:>16,} {row['active']:>16,}{text}")
    if args.check:
        stored = json.loads(COUNTS.read_text(encoding="utf-8"))
        same = stored["counts"] == result["counts"]
        print("counts.json agrees" if same else "counts.json differs")
        return 0 if same else 1
    COUNTS.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {COUNTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
