"""A state-space mixer is priced from its family's layout: an author's own family needs no Python.

The ssm flavour's parameters are the sum of the bound family's layout entries and
its weight matmuls the per-token multiply-adds of its module weights of rank ≥ 2
(hpdsl.ir.layouts.layout_tally); the scan is linear in the sequence.

The author's family, profile, model, pyproject and torch module are read from
docs/language.md ("An author's own mixer family, end to end"), and every command
that section shows is run and must print the lines it shows: the doc cannot rot.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.flops import layer_flop_terms
from hpdsl.diagnostics import Source

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
SECTION = "### An author's own mixer family, end to end"


def doc_blocks() -> list[str]:
    """Return the fenced blocks of docs/language.md's own-mixer section, in order."""
    text = DOC.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return text.split("```\n")[1::2]


def doc_file(first_line: str) -> str:
    """Return the section's block whose first line names a file (`// acme.hpf`, `# pyproject.toml`)."""
    found = [block for block in doc_blocks() if block.startswith(first_line)]
    assert len(found) == 1, f"docs/language.md shows {len(found)} blocks headed {first_line!r}"
    return found[0]


OWN = doc_file("// acme.hpf")
"""The author's family, profile and model exactly as docs/language.md shows them."""


@pytest.fixture(scope="module")
def own():
    registry = compile_sources([Source("acme.hpf", OWN)])
    model = registry.models["acme_small"]
    return bind(model, registry.profile("acme"), families=registry.families)


def test_an_authors_family_prices_its_layout(own) -> None:
    h, inner, state = 32, 64, 4
    mixer = 2 * inner * h + 2 * inner + inner * state + h * inner
    layer = parameters(own).per_kind["ssm_layer"]
    assert layer.attention == mixer == 6_528
    assert layer.total == mixer + 2 * h + 3 * h * 64
    assert own.kind_config("ssm_layer").mixer_macs == 2 * inner * h + h * inner  # A is no module weight


def test_the_scan_is_linear_in_the_sequence(own) -> None:
    column = model_columns(own).layer_column("ssm_layer")
    terms = layer_flop_terms(column.config, column.matmuls)
    assert terms["scan"].t == 2 * 64 * 4 and terms["scan"].ts == 0
    assert terms["attMM"].t == 2 * (2 * 64 * 32 + 32 * 64)  # 2 FLOPs per multiply-add of each module weight
    assert all(term.ts == 0 for term in terms.values())  # no score work: nothing grows with s²


def test_flags_in_dims_leave_parameters_out() -> None:
    """ssm_conv_bias false and ssm_proj_bias true: exact against transformers' Jamba on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    text = """
model biased : jamba {
  hidden 64
  layers 2
  heads 4
  vocab 128
  ffn_width 96
  ssm { ssm_state 8  ssm_conv 4  ssm_expand 2  ssm_dt_rank 4  ssm_proj_bias  ssm_norms }
  stack [mamba_dense, attention_dense]
}
"""
    registry = compile_sources([Source("biased.hpf", text)])
    count = parameters(bind(registry.models["biased"], registry.profile("jamba"), families=registry.families))
    config = transformers.JambaConfig(hidden_size=64, num_hidden_layers=2, intermediate_size=96,
                                      num_attention_heads=4, num_key_value_heads=4, num_experts=1,
                                      mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4,
                                      mamba_conv_bias=False, mamba_proj_bias=True, vocab_size=128,
                                      attn_layer_period=2, attn_layer_offset=1)
    with torch.device("meta"):
        hf = transformers.JambaForCausalLM(config)
    assert count.total == sum(p.numel() for p in hf.parameters())


def _transcripts() -> list[tuple[str, list[str]]]:
    """Return each `$ command` of the section's console blocks with the lines it shows (`...` elides)."""
    runs: list[tuple[str, list[str]]] = []
    for block in (b for b in doc_blocks() if b.startswith("$ ")):
        for line in block.splitlines():
            if line.startswith("$ "):
                runs.append((line[2:], []))
            elif line != "...":
                runs[-1][1].append(line)
    return runs


def _project(tmp_path: Path) -> Path:
    """Write the author's project as the doc shows it: acme.hpf, pyproject.toml, acme/, the script."""
    (tmp_path / "acme.hpf").write_text(OWN)
    (tmp_path / "pyproject.toml").write_text(doc_file("# pyproject.toml"))
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "__init__.py").write_text("")
    (tmp_path / "acme" / "ssm.py").write_text(doc_file("# acme/ssm.py"))
    (tmp_path / "train_one_step.py").write_text(doc_file("# train_one_step.py"))
    return tmp_path


@pytest.fixture
def fresh_acme():
    """Forget the `acme` package between tests: each test's project is a different folder."""
    def forget() -> None:
        for name in [n for n in sys.modules if n == "acme" or n.startswith("acme.")]:
            del sys.modules[name]

    forget()
    yield
    forget()


def _run(command: str, cwd: Path, *, returncode: int | None = None) -> list[str]:
    """Run a command in the project (this checkout's hpdsl); return its output lines."""
    program, *args = command.split()
    argv = {"hpdsl": [sys.executable, "-m", "hpdsl.cli"], "python": [sys.executable]}[program] + args
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "200"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert returncode is None or done.returncode == returncode, (command, done.stderr)
    return [line.rstrip() for line in (done.stdout + done.stderr).splitlines()]


def _shown_in_order(shown: list[str], output: list[str]) -> bool:
    lines = iter(output)
    return all(any(line == want for line in lines) for want in shown)


def test_the_docs_transcripts_are_what_hpdsl_prints(tmp_path: Path) -> None:
    """Every command docs/language.md shows for the author's mixer prints the lines it shows, in order."""
    project = _project(tmp_path)
    runs = _transcripts()
    assert [c for c, _ in runs] == ["hpdsl estimate acme.hpf", "hpdsl estimate acme.hpf --seq-len 8192",
                                    "hpdsl estimate acme.hpf --cp 2", "python train_one_step.py"]
    for command, shown in runs:
        if command.startswith("python"):
            pytest.importorskip("torch")
        output = _run(command, project)
        assert _shown_in_order(shown, output), (command, shown, output)
    _run("hpdsl fmt --check acme.hpf", project, returncode=0)  # the doc shows the canonical form


def test_the_docs_module_builds_with_the_priced_parameters(tmp_path: Path, monkeypatch, fresh_acme) -> None:
    """The doc's TinySSM, trusted through its pyproject, builds with every layout entry and trains."""
    torch = pytest.importorskip("torch")
    from hpdsl.torch import build_model

    project = _project(tmp_path)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    registry = compile_sources([Source("acme.hpf", OWN)])
    built = build_model("acme_small", registry=registry, device="cpu")
    model = registry.models["acme_small"]
    assert sum(p.numel() for p in built.parameters()) == parameters(
        bind(model, registry.profile("acme"), families=registry.families)).total == 44_640
    built(torch.randint(0, 100, (2, 16))).logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in built.parameters())


def test_a_module_that_drifts_from_the_layout_is_refused(tmp_path: Path, monkeypatch, fresh_acme) -> None:
    """A w_out bias the layout does not declare: the build names it instead of building a model priced wrong."""
    pytest.importorskip("torch")
    from hpdsl.errors import BuildError
    from hpdsl.torch import build_model

    project = _project(tmp_path)
    drifted = doc_file("# acme/ssm.py").replace("config.hidden, bias=False)", "config.hidden, bias=True)")
    (project / "acme" / "drifted.py").write_text(drifted)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    registry = compile_sources([Source("acme.hpf", OWN.replace('"acme.ssm:', '"acme.drifted:'))])
    with pytest.raises(BuildError, match="w_out.bias"):
        build_model("acme_small", registry=registry, device="cpu")


def test_the_docs_module_saves_what_its_saved_term_declares(tmp_path: Path, monkeypatch, fresh_acme) -> None:
    """The built TinySSM keeps for backward, beside its input and parameters, the `saved scan` elements per token.

    Measured with autograd's saved-tensor hooks on the module the builder made: each saved tensor
    once (a tensor saved by two ops is one); the parameters, the tensors with no token dim (the
    decay, computed from A once per step) and the mixer's input left out, the estimator pricing the
    layer's input apart.
    """
    torch = pytest.importorskip("torch")
    from hpdsl.torch import build_model

    project = _project(tmp_path)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    registry = compile_sources([Source("acme.hpf", OWN)])
    mixer = next(m for m in build_model("acme_small", registry=registry, device="cpu").modules()
                 if type(m).__name__ == "TinySSM")
    batch, seq = 3, 5  # b·s = 15: no saved tensor's leading dim is a model width by chance
    x = torch.randn(batch, seq, 32, requires_grad=True)
    params = {p.untyped_storage().data_ptr() for p in mixer.parameters()}
    kept: dict[tuple[int, int, tuple[int, ...]], int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr != x.untyped_storage().data_ptr() and t.shape[:1] in ((batch,), (batch * seq,)):
            kept[ptr, t.storage_offset(), tuple(t.shape)] = t.numel()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        mixer(x)
    column = model_columns(bind(registry.models["acme_small"], registry.profile("acme"),
                                families=registry.families)).layer_column("ssm_layer")
    inner, state = 2 * 32, 4
    assert [(t.name, t.t) for t in column.saved] == [("scan", inner * state + 4 * inner)]
    assert sum(kept.values()) / (batch * seq) == inner * state + 4 * inner == 512
