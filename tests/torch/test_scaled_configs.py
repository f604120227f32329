"""Every published config, scaled down, builds on the CPU and trains: forward, loss, backward.

Each config of tests/importers/hf_configs.py is imported as `hpdsl import-hf` imports it,
then cut down by bench/agreement.py's small_model: small hidden, heads, vocab and experts,
a few layers keeping every kind of its stack and every flag (sliding windows of 8 tokens
on 16-token sequences, so the window masks; a 32-row learned position table; Mamba-1 and
Mamba-2 mixers at small state, heads and chunks; MLA; sandwich norms; both T5 towers).
The scaled model is built by hpdsl.torch.build_model on the CPU, has exactly the
parameters hpdsl.cost.parameters prices for it, and one cross-entropy step on its logits
gives every trainable parameter a finite gradient. The full-size counts are
tests/cost/test_params_hf_real.py's.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agreement import small_model  # noqa: E402  (bench/, put on the path by conftest.py)

from hpdsl.api import compile_paths, compile_sources  # noqa: E402
from hpdsl.cost import bind, parameters  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.importers.hf import import_hf_config  # noqa: E402
from hpdsl.ir.nodes import ModelIR, block_stated  # noqa: E402
from hpdsl.model.fields import BLOCKS, FIELDS  # noqa: E402
from hpdsl.registry import Registry  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from hpdsl.torch.layers import Seq2SeqLM  # noqa: E402
from tests.importers.hf_configs import CONFIGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BATCH, SEQ, WINDOW, POSITIONS = 2, 16, 8, 32
STREAM = 7
"""Tokens of the random stream a cross-attention layer reads (any length: the stream is not the sequence)."""
FLAGS = [name for name, field in FIELDS.items() if field.type in ("bool", "choice")]
"""The structural flags and choices a scaled model keeps (biases, norms, sinks, positions, ...)."""


@pytest.fixture(scope="module")
def stdlib() -> Registry:
    return _stdlib()


@functools.cache
def _stdlib() -> Registry:
    return compile_paths([ROOT / "profiles", ROOT / "families"])


def _imported(name: str, stdlib: Registry) -> Registry:
    """Return the config imported and compiled; once per name (a Registry is frozen: three tests share it)."""
    return _imported_once(name)


@functools.cache
def _imported_once(name: str) -> Registry:
    config, _ = CONFIGS[name]
    imported = import_hf_config(config, profiles=_stdlib().profiles, name=name)
    return compile_sources([Source(f"{name}.hpf", imported.text)])


def _kinds(model: ModelIR) -> set[str]:
    return {g.kind for g in model.groups if not g.mtp}


def _built(model: ModelIR, registry: Registry) -> torch.nn.Module:
    """Build on the meta device, then allocate and initialise on the CPU (materialize: every weight set)."""
    return materialize(build_model(model, registry=registry, device="meta"), "cpu", seed=0)


def _inputs(built: torch.nn.Module, vocab: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    towers = 2 if isinstance(built, Seq2SeqLM) else 1  # source and target token ids
    return [torch.randint(0, vocab, (BATCH, SEQ), generator=generator) for _ in range(towers)]


def _stream(model: ModelIR, registry: Registry) -> list[torch.Tensor]:
    """Return the stream a model's cross-attention layers attend to (Mllama's projected vision tokens): random, hidden wide."""
    kinds = registry.profile(model.profile).kinds
    if not any(kinds[kind].attention == "cross" for kind in _kinds(model) if kind in kinds):
        return []
    return [torch.randn(BATCH, STREAM, model.hidden, generator=torch.Generator().manual_seed(2))]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_scaled_config_keeps_its_structure(name: str, stdlib: Registry) -> None:
    full = _imported(name, stdlib).models[name]
    small = small_model(full, window=WINDOW, positions=POSITIONS)
    assert _kinds(small) == _kinds(full)
    assert {f: getattr(small, f) for f in FLAGS} == {f: getattr(full, f) for f in FLAGS}
    assert [b for b in BLOCKS if block_stated(small, b)] == [b for b in BLOCKS if block_stated(full, b)]
    assert small.hidden < full.hidden and small.layers <= min(full.layers, 8)
    assert small.sliding_window == (None if full.sliding_window is None else WINDOW)
    assert small.max_positions == (POSITIONS if full.learned_positions else None)
    if full.ssm_heads is not None:  # Mamba-2: the heads split d_inner evenly, the groups the heads
        assert small.ssm_head_dim or small.ssm_expand * small.hidden % small.ssm_heads == 0
        assert (small.ssm_head_dim is None) == (full.ssm_head_dim is None)
        assert small.ssm_heads % (small.ssm_groups or 1) == 0


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_scaled_config_builds_and_trains_on_cpu(name: str, stdlib: Registry) -> None:
    registry = _imported(name, stdlib)
    model = small_model(registry.models[name], window=WINDOW, positions=POSITIONS)
    built = _built(model, registry)
    cost = bind(model, registry.profile(model.profile), families=registry.families)
    assert sum(p.numel() for p in built.parameters()) == parameters(cost).total

    inputs = _inputs(built, model.vocab)
    logits = built(*inputs, *_stream(model, registry))
    assert logits.shape == (BATCH, SEQ, model.vocab)
    targets = torch.randint(0, model.vocab, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
    assert torch.isfinite(loss)
    loss.backward()
    # A frozen parameter (Laguna's score correction, router_correction_counted) takes none.
    missing = [n for n, p in built.named_parameters() if p.requires_grad and p.grad is None]
    bad = [n for n, p in built.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert not missing and not bad, (missing, bad)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_cpu_build_initialises_every_parameter(name: str, stdlib: Registry) -> None:
    """build_model straight on the CPU leaves no torch.empty memory: two builds under one seed are equal."""
    registry = _imported(name, stdlib)
    model = small_model(registry.models[name], window=WINDOW, positions=POSITIONS)
    builds = []
    for _ in range(2):
        torch.manual_seed(0)
        builds.append(dict(build_model(model, registry=registry, device="cpu").named_parameters()))
    assert [n for n, p in builds[0].items() if not torch.equal(p, builds[1][n])] == []


def test_a_scaled_window_masks_the_sequence(stdlib: Registry) -> None:
    """gpt-oss's sliding layers attend through the scaled window: a wider window changes the logits."""
    registry = _imported("gpt_oss_120b", stdlib)
    full = registry.models["gpt_oss_120b"]
    outputs = []
    for window in (WINDOW, SEQ, SEQ + 8):
        model = small_model(full, window=window)
        built = _built(model, registry)
        outputs.append(built(*_inputs(built, model.vocab)))
    assert torch.allclose(outputs[1], outputs[2], atol=1e-5)  # a window of the whole sequence masks nothing more
    assert not torch.allclose(outputs[0], outputs[1])
