"""The built model's rotary embedding is transformers': every published config, every layer.

For each published config.json in tests/data/hf (sources in tests/data/hf/SOURCES.md), the
config is imported with hpdsl's importer (its rope_theta, partial_rotary_factor and
rope_scaling / rope_parameters read by profiles/default.hpf and the profiles' defaults for the
config classes' own) and built on the meta device; every layer's inverse frequencies and cos/sin
scale (hpdsl/torch/modules/rope.py) must equal those of transformers' rotary embedding for that
layer's type, built from the same config by transformers' own config class. A config hpdsl
refuses is skipped naming the construct; one transformers builds without a rotary embedding
(GPT-2, Nemotron-H) must have none turned in hpdsl's build either.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.importers.hf_config import HfImportError  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.modules.rope import Rotary, frequencies  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = sorted(p for p in (ROOT / "tests" / "data" / "hf").glob("*.json") if p.name != "counts.json")


@pytest.fixture(scope="module")
def stdlib() -> Registry:
    return compile_paths([ROOT / "profiles", ROOT / "families"])


def _transformers_rotary(config: dict[str, Any]) -> tuple[Any, Any]:
    """Return (the text config, its rotary embedding) as transformers builds them; None: the model has none."""
    text = transformers.AutoConfig.for_model(**config).get_text_config()
    package = type(text).__module__.split(".")[-2]
    modeling = importlib.import_module(f"transformers.models.{package}.modeling_{package}")
    names = sorted((n for n in dir(modeling) if n.endswith("RotaryEmbedding")
                    and not any(tower in n for tower in ("Vision", "Vit", "Audio"))),
                   key=lambda n: ("Text" not in n, len(n)))
    return text, (getattr(modeling, names[0])(config=text) if names else None)


def _turned(model: Any) -> list[tuple[int, Rotary]]:
    """Return (layer index, rotary) of every body layer whose mixer turns its queries and keys."""
    found = []
    for name, module in model.named_modules():
        rotary = getattr(module, "rotary", None)
        if isinstance(rotary, Rotary) and name.startswith("layers.") and name.count(".") == 2:
            c = rotary.config
            if c.rope and not c.no_rope and not c.alibi:
                found.append((int(name.split(".")[1]), rotary))
    return found


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.stem for p in PUBLISHED])
def test_every_layer_turns_as_transformers_does(path: Path, stdlib: Registry) -> None:
    config = json.loads(path.read_text())
    try:
        imported = import_hf_config(config, profiles=stdlib.profiles, name="m")
    except HfImportError as exc:
        pytest.skip(f"refused by the importer: {exc}")
    registry = compile_sources([Source("m.hpf", imported.text)])
    turned = _turned(build_model(registry.models["m"], registry=registry, device="meta"))
    text, reference = _transformers_rotary(config)
    if reference is None:
        assert turned == [], "transformers builds no rotary embedding for this model"
        return
    assert turned, "transformers turns this model's queries and keys; hpdsl's build turns none"
    types = getattr(text, "layer_types", None)
    for index, rotary in turned:
        kind = types[index] if types and hasattr(reference, f"{types[index]}_inv_freq") else None
        if types and kind is None and hasattr(reference, "main_inv_freq"):  # DeepSeek-V4: per rope type, not layer
            kind = "main" if types[index] == "sliding_attention" else "compress"  # DeepseekV4Attention's rule
        want = getattr(reference, f"{kind}_inv_freq" if kind else "inv_freq").float()
        want_scale = getattr(reference, f"{kind}_attention_scaling" if kind else "attention_scaling")
        got, scale = frequencies(rotary.config, rotary.dim, rotary.fraction, sliding=rotary.sliding)
        assert got.shape == want.shape, f"layer {index} ({kind}): {got.shape[0]} pairs, not {want.shape[0]}"
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0, msg=f"layer {index} ({kind})")
        assert scale == pytest.approx(want_scale, rel=1e-9), f"layer {index} ({kind})"


def test_the_published_configs_cover_every_built_rope_type(stdlib: Registry) -> None:
    """The files above hold every rope_type hpdsl builds but dynamic: default, linear, llama3, yarn, proportional."""
    seen = set()
    for path in PUBLISHED:
        try:
            imported = import_hf_config(json.loads(path.read_text()), profiles=stdlib.profiles, name="m")
        except HfImportError:
            continue
        seen.add(compile_sources([Source("m.hpf", imported.text)]).models["m"].rope_type or "default")
    assert {"default", "linear", "llama3", "yarn", "proportional"} <= seen


@pytest.mark.parametrize("longest", [64, 128, 300])
def test_dynamic_is_transformers_dynamic_ntk(longest: int) -> None:
    """No published config here states dynamic: transformers' own function at a sequence of `longest` is the reference."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from hpdsl.bound.config import LayerConfig

    reference = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64,
                                         rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 5e5})
    want, _ = ROPE_INIT_FUNCTIONS["dynamic"](reference, None, seq_len=longest)
    config = LayerConfig(hidden=64, rope_type="dynamic", rope_factor=2.0, rope_theta=5e5, max_positions=64, head_dim=16)
    got, scale = frequencies(config, 16, longest=longest)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    assert scale == 1.0


def test_longrope_is_refused_naming_it() -> None:
    from hpdsl.bound.config import LayerConfig
    from hpdsl.errors import BuildError

    with pytest.raises(BuildError, match="longrope"):
        Rotary(LayerConfig(hidden=64, rope_type="longrope", head_dim=16), 16)
