"""Eager execution priced from the families' `eager` terms (docs/cost-model.md, "Eager execution").

On a device that states a call_overhead, a column whose slots all declare eager terms costs its
declared calls × call_overhead and its declared elements × the compute bytes / eager_bandwidth
each micro-batch; a column with a slot that declares none keeps the op-vector pricing; a device
without a call_overhead prices as before. The checker keeps an eager term to what it can say.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from cost_builders import device_text

from hpdsl.api import bind_model, check_sources
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.grid import StrategyGrid
from hpdsl.cost.price.grid import price_grid
from hpdsl.cost.price.prepare import prepare
from hpdsl.cost.facts.columns import model_columns
from hpdsl.diagnostics import Source
from hpdsl.model.strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]
SMALL = """
model small : llama2 {
  hidden 64  layers 3  heads 4  kv_heads 2  vocab 128  ffn_width 96
}
"""
SEQ, BATCH = 32, 4


def _device(tmp_path: Path, name: str, **facts: str) -> str:
    path = tmp_path / f"{name}.hpf"
    path.write_text(device_text(name, "test", op_overhead="1.0e-4", **facts), encoding="utf-8")
    return str(path)


def _step(model: object, device: str, **strategy: object) -> float:
    chosen = Strategy(**{"seq_len": SEQ, "global_batch": BATCH, "precision": "fp32", "device": device,
                         **strategy})  # type: ignore[arg-type]
    return estimate(model, chosen).step_time_s  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> object:
    path = tmp_path_factory.mktemp("eager") / "small.hpf"
    path.write_text(SMALL, encoding="utf-8")
    return bind_model([path], "small")


def _calls(model: object) -> Fraction:
    """Return the eager calls of one micro-batch through the whole model (tp 1, pp 1)."""
    columns = model_columns(model)  # type: ignore[arg-type]
    calls = Fraction(0)
    for column in columns.columns:
        assert column.eager is not None, column.name
        runs = columns.layers if column.role == "layer" else 1
        calls += runs * column.eager.calls
    return calls


def test_each_declared_call_costs_the_devices_call_overhead(small: object, tmp_path: Path) -> None:
    slow = _step(small, _device(tmp_path, "slow", call_overhead="2.0e-5", eager_bandwidth="1.0e+10"))
    fast = _step(small, _device(tmp_path, "fast", call_overhead="1.0e-5", eager_bandwidth="1.0e+10"))
    micro_batches = BATCH  # one sequence per micro-batch by default
    assert slow - fast == pytest.approx(micro_batches * float(_calls(small)) * 1.0e-5, rel=1e-9)


def test_each_declared_element_moves_at_the_devices_eager_bandwidth(small: object, tmp_path: Path) -> None:
    slow = _step(small, _device(tmp_path, "narrow", call_overhead="1.0e-5", eager_bandwidth="1.0e+9"))
    fast = _step(small, _device(tmp_path, "wide", call_overhead="1.0e-5", eager_bandwidth="2.0e+9"))
    columns = model_columns(small)  # type: ignore[arg-type]
    per_token = Fraction(0)
    for column in columns.columns:
        assert column.eager is not None
        work = column.eager
        moved = work.split + work.sequence + work.whole + work.logits
        per_token += (columns.layers if column.role == "layer" else 1) * moved
    bytes_per_step = BATCH * SEQ * 4 * float(per_token)
    assert slow - fast == pytest.approx(bytes_per_step * (1 / 1.0e9 - 1 / 2.0e9), rel=1e-9)


def test_without_a_call_overhead_the_eager_terms_are_not_read(small: object, tmp_path: Path) -> None:
    plain = _device(tmp_path, "plain")
    same = _device(tmp_path, "same", eager_bandwidth="1.0e+3")  # no call_overhead: the bandwidth is not read
    assert _step(small, plain) == _step(small, same)


def test_a_grid_over_two_devices_prices_each_candidate_as_its_own_device(small: object, tmp_path: Path) -> None:
    eager = _device(tmp_path, "eager_cpu", call_overhead="1.0e-5", eager_bandwidth="1.0e+10")
    fused = _device(tmp_path, "fused_gpu")
    strategies = [Strategy(seq_len=SEQ, global_batch=BATCH, precision="fp32", device=d, recompute=r)  # type: ignore[arg-type]
                  for d in (eager, fused) for r in ("none", "full")]
    prepared = prepare(small)  # type: ignore[arg-type]
    price = price_grid(prepared, StrategyGrid.from_strategies(strategies))
    for k, strategy in enumerate(strategies):
        assert float(price.step_time_s[k]) == pytest.approx(estimate(small, strategy).step_time_s, rel=1e-12)


def test_tp_splits_the_heads_work_and_keeps_the_norms_whole(small: object, tmp_path: Path) -> None:
    device = _device(tmp_path, "tp", call_overhead="1.0e-12", eager_bandwidth="1.0e+9")
    cheap = _device(tmp_path, "tp_cheap", call_overhead="1.0e-12", eager_bandwidth="2.0e+9")
    columns = model_columns(small)  # type: ignore[arg-type]
    layer = columns.columns[0].eager
    assert layer is not None and layer.split > 0 and layer.sequence > 0
    for sp in (False, True):
        one = _step(small, device, tp=2, sequence_parallel=sp) - _step(small, cheap, tp=2, sequence_parallel=sp)
        per_token = layer.split / 2 + layer.sequence / (2 if sp else 1) + layer.whole
        assert one > 0
        layers_share = BATCH * SEQ * 4 * columns.layers * float(per_token) * (1 / 1.0e9 - 1 / 2.0e9)
        assert one >= layers_share * (1 - 1e-9)


def test_a_family_without_eager_terms_leaves_its_column_to_the_op_vector() -> None:
    qwen3_next = bind_model([ROOT / "examples" / "qwen3_next_80b_a3b.hpf"], "qwen3_next_80b_a3b")
    layers = {c.kind: c.eager for c in model_columns(qwen3_next).columns if c.role == "layer"}  # type: ignore[arg-type]
    assert layers["linear_attention"] is None  # the Gated DeltaNet declares none
    mixtral = bind_model([ROOT / "examples" / "mixtral_8x7b.hpf"], "mixtral_8x7b")
    assert all(c.eager is not None for c in model_columns(mixtral).columns)  # type: ignore[arg-type]


OWN_FFN = """
family own_ffn {
  factory "acme.ffn:Own"
  variant plain "acme.ffn:Own" default params(w_in, w_out)
  layout {
    w_in.weight  (ffn_width, hidden) colwise
    w_out.weight (hidden, ffn_width) rowwise
  }
  cost {
    EAGER
  }
}
profile acme {
  slots { mlp own_ffn }
  kind decoder {
    ops { attMM 4  attBMM 2  ffMM 2  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0 }
  }
}
model acme_small : acme {
  hidden 64  layers 2  heads 4  vocab 128  ffn_width 96
  mlp plain
}
"""


def _own(eager: str, tmp_path: Path) -> object:
    path = tmp_path / "acme.hpf"
    path.write_text(OWN_FFN.replace("EAGER", eager), encoding="utf-8")
    return bind_model([path], "acme_small")


def test_an_authors_feed_forward_is_priced_by_its_own_eager_terms(tmp_path: Path) -> None:
    device = _device(tmp_path, "own", call_overhead="1.0e-5", eager_bandwidth="1.0e+10")
    few = _step(_own("eager calls = 10\n    eager moved = 4 * ffn_width", tmp_path), device)
    many = _step(_own("eager calls = 30\n    eager moved = 4 * ffn_width", tmp_path), device)
    assert many - few == pytest.approx(BATCH * 2 * 20 * 1.0e-5, rel=1e-9)  # 2 layers, 20 more calls each


@pytest.mark.parametrize(("term", "code"), [
    ("eager calls = 3 replicate", "eager-term-clause"),
    ("eager calls = 3 * keys", "eager-term-clause"),
    ("eager moved = hidden at fp32", "eager-term-clause"),
    ("eager moved = hidden routed", "eager-term-clause"),
    ("eager moves = hidden", "unknown-cost-term"),
    ("eager calls = 3 if norm == rmsnorm", None),
    ("eager calls = 3 if norm == rmsnrom", "unknown-choice"),
    ("eager calls = 3 if not (activation == gelu or activation == relu3)", "unknown-choice"),
    ("eager calls = 3 if activation != relu2 and mlp_bias", None),
])
def test_the_checker_keeps_an_eager_term_to_what_it_can_say(term: str, code: str | None) -> None:
    diagnostics = check_sources([Source("acme.hpf", OWN_FFN.replace("EAGER", term))]).diagnostics
    codes = [d.code for d in diagnostics if d.severity == "error"]
    assert codes == ([code] if code else [])
    if code == "unknown-cost-term":
        assert "moved" in next(d for d in diagnostics if d.code == code).message
