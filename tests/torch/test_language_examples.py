"""docs/language.md's worked examples (GPT-NeoX-20B, Falcon-7B, an RWKV channel mix), run as the doc shows them.

Each `.hpf` block of the doc's "Worked examples" section is written out under the name its first
line gives, and the doc's commands run through the real CLI. The estimate is held to
transformers' count of the same model on the meta device: transformers' config class is built
from the compiled model's fields (no published config.json of either model is in the search
index; the doc says so). `build_model` builds as many parameters. A scaled copy of each (the
doc's text with its dims made small) is built by hpdsl and by transformers; transformers'
random weights, loaded into hpdsl's model under the example's own `weight` rules (its fused
query_key_value cut into q, k and v by a `split` rule), give transformers' logits to 1e-4 in
float32 on the CPU. The RWKV section's family, module and script are written out as the doc
names them: its `mlp` slot is transformers' RwkvFeedForward, in count and in what it computes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpdsl.api import compile_sources  # noqa: E402
from hpdsl.diagnostics import Source  # noqa: E402
from hpdsl.ir.nodes import ModelIR  # noqa: E402
from hpdsl.torch import build_model  # noqa: E402
from hpdsl.torch.model import materialize  # noqa: E402
from hpdsl.torch.weights import load_hf_state_dict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "language.md"
SECTION = "### Worked examples: GPT-NeoX-20B and Falcon-7B"
SMALL = {"hidden": 64, "layers": 2, "heads": 4, "vocab": 101, "ffn_width": 256, "max_positions": 64}
"""The scaled copies' dims (Falcon's feed-forward is 4 × hidden in transformers, so 256)."""


def doc_section(title: str = SECTION) -> str:
    """Return the doc's section under `title`, up to the next heading of level 2 or 3."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(title) + len(title):]
    return title + re.split(r"\n##+ ", section, maxsplit=1)[0]


def doc_blocks(title: str = SECTION) -> dict[str, str]:
    """Return a section's code blocks by the file name their first line (`// name.hpf`, `# name.py`) gives."""
    blocks = re.findall(r"```\n((?://|#) (\S+\.(?:hpf|py))\b.*?)```", doc_section(title), flags=re.S)
    return {name: body for body, name in blocks}


def doc_commands(title: str = SECTION) -> list[list[str]]:
    """Return a section's `hpdsl ...` and `python ...` command lines, comments stripped."""
    return [line.split("#")[0].split() for line in doc_section(title).splitlines()
            if line.startswith(("hpdsl ", "python "))]


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def _model(text: str, name: str) -> tuple[ModelIR, Any]:
    registry = compile_sources([Source(name, text)])
    (model,) = registry.models.values()
    return model, registry


def _hf_config(model: ModelIR) -> Any:
    """Return transformers' config of the model class the example writes, from the compiled model's fields."""
    if model.profile == "gpt_neox":
        return transformers.GPTNeoXConfig(
            hidden_size=model.hidden, num_hidden_layers=model.layers, num_attention_heads=model.heads,
            vocab_size=model.vocab, intermediate_size=model.ffn_width, max_position_embeddings=model.max_positions,
            rotary_pct=model.rotary_fraction, hidden_act=model.activation, use_parallel_residual=True,
            attention_bias=bool(model.qkv_bias), tie_word_embeddings=bool(model.tie_embeddings),
            layer_norm_eps=model.norm_eps)
    assert model.profile == "falcon" and model.kv_heads == 1 and model.ffn_width == 4 * model.hidden
    return transformers.FalconConfig(
        hidden_size=model.hidden, num_hidden_layers=model.layers, num_attention_heads=model.heads,
        vocab_size=model.vocab, max_position_embeddings=model.max_positions, multi_query=True, parallel_attn=True,
        new_decoder_architecture=False, bias=bool(model.qkv_bias), alibi=False, activation=model.activation,
        tie_word_embeddings=bool(model.tie_embeddings), layer_norm_epsilon=model.norm_eps)


def _meta_count(config: Any) -> int:
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in built.parameters())


def test_the_doc_shows_both_files_and_the_commands() -> None:
    assert sorted(doc_blocks()) == ["falcon.hpf", "gpt_neox.hpf"]
    assert [c[1] for c in doc_commands()] == ["compile", "estimate", "estimate"]


def test_the_docs_commands_run_and_each_estimate_is_transformers_count(tmp_path: Path) -> None:
    blocks = doc_blocks()
    for name, body in blocks.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    totals: dict[str, int] = {}
    for command in doc_commands():
        run = _hpdsl(*command[1:], cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        if command[1] == "estimate":
            totals[command[2]] = json.loads(run.stdout)["params"]["total"]
        else:
            assert (tmp_path / command[command.index("-o") + 1]).is_file()
    for name, total in totals.items():
        model, registry = _model(blocks[name], name)
        assert total == _meta_count(_hf_config(model)), name
        assert sum(p.numel() for p in build_model(model, registry=registry, device="meta").parameters()) == total
        assert f"params.total {total:,}" in DOC.read_text(encoding="utf-8")


def _scaled(text: str) -> str:
    """Return the example with SMALL's dims in place of its own (its wiring, flags and kv_heads kept)."""
    for field, value in SMALL.items():
        text, count = re.subn(rf"^(  {field}) \d+$", rf"\1 {value}", text, flags=re.M)
        assert count == 1, field
    return text


@pytest.mark.parametrize("name", ["gpt_neox.hpf", "falcon.hpf"])
def test_a_scaled_copy_computes_transformers_logits(name: str) -> None:
    model, registry = _model(_scaled(doc_blocks()[name]), name)
    ours = materialize(build_model(model, registry=registry, device="meta"), "cpu", seed=0).eval()
    torch.manual_seed(0)
    config = _hf_config(model)
    config._attn_implementation = "eager"
    theirs = transformers.AutoModelForCausalLM.from_config(config).float().eval()
    # GPTNeoXForCausalLM's weight names are the standard neox profile's rules (it claims model_type gpt_neox);
    # Falcon's are the doc's own profile's
    rules = registry.profile("neox" if model.profile == "gpt_neox" else model.profile)
    load_hf_state_dict(ours, theirs.state_dict(), rules, model.profile, registry.profiles, model_ir=model)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    ids = torch.randint(0, SMALL["vocab"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=1e-4)


RWKV = "### Worked example: an RWKV channel mix in the `mlp` slot"


def test_the_rwkv_example_prices_and_builds_transformers_channel_mix(tmp_path: Path) -> None:
    """The doc's files and commands: the slot is RwkvFeedForward's count, the build the estimate's."""
    from transformers.models.rwkv.modeling_rwkv import RwkvFeedForward

    blocks = doc_blocks(RWKV)
    assert sorted(blocks) == ["acme/rwkv.py", "build_one.py", "rwkv.hpf"]
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text('[tool.hpdsl]\ntrusted = ["acme"]\n')
    for name, body in blocks.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    estimate, build = doc_commands(RWKV)
    run = _hpdsl(*estimate[1:], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    params = json.loads(run.stdout)["params"]
    model, _ = _model(blocks["rwkv.hpf"], "rwkv.hpf")
    with torch.device("meta"):
        theirs = RwkvFeedForward(transformers.RwkvConfig(hidden_size=model.hidden, intermediate_size=model.ffn_width))
    slot = sum(p.numel() for p in theirs.parameters())
    assert params["per_kind"]["decoder"]["dense_ffn"] == slot == 5_309_952
    built = subprocess.run([sys.executable, *build[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == f"{params['total']:,} parameters built"
    doc = doc_section(RWKV)
    assert f"dense_ffn {slot:,}" in doc and f"{params['total']:,} parameters built" in doc


def test_the_rwkv_module_computes_transformers_channel_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.rwkv.modeling_rwkv import RwkvFeedForward

    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "__init__.py").write_text("")
    (tmp_path / "acme" / "rwkv.py").write_text(doc_blocks(RWKV)["acme/rwkv.py"], encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "acme", raising=False)
    from acme.rwkv import ChannelMix  # type: ignore[import-not-found]

    torch.manual_seed(0)
    theirs = RwkvFeedForward(transformers.RwkvConfig(hidden_size=16, intermediate_size=40)).eval()
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.copy_(torch.rand_like(parameter) - 0.5)
    config = type("SlotConfig", (), {"hidden": 16, "ffn_width": 40})()
    ours = ChannelMix(config).eval()
    state = theirs.state_dict()
    with torch.no_grad():
        for name, parameter in ours.named_parameters():
            parameter.copy_(state[name].reshape(parameter.shape))
        x = torch.randn(2, 7, 16)
        torch.testing.assert_close(ours(x), theirs(x)[0])
