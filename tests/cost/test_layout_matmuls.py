"""Every slot's weight matmuls come from its family's layout (hpdsl/cost/facts/matmuls.py).

What is a matmul is read off the layout: a module's `weight` of rank ≥ 2, an
experts bank (rank ≥ 3, top_k of its experts per token), an embedding table
(first dim `vocab`) gathered, a tied head multiplying by the embedding's
`weight`; placement as the replication facts read it (MLA's latent
down-projections on every tp rank, the rest split).
"""

from __future__ import annotations

import pytest
from cost_builders import LLAMA_OPS, dense_model, example

from hpdsl.api import compile_sources
from hpdsl.cost import bind, parameters
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.facts.params import UnpricedSlotError
from hpdsl.cost.formulas.flops import forward_flops_by_term
from hpdsl.diagnostics import Source

VECTOR = "attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"
H, VOCAB, WIDTH, BATCH, SEQ = 32, 100, 64, 2, 8
TOKENS = BATCH * SEQ

AUTHORS = f"""
family projected_table {{
  factory "acme:Table"
  variant table "acme:Table" default params(weight, project)
  layout {{
    weight         (vocab, hidden)  rowwise(0)
    project.weight (hidden, hidden) replicate
  }}
}}

family routed_bank {{
  factory "acme:Bank"
  parallel ep
  variant local "acme:Bank" default params(bank, mix, scale)
  layout {{
    bank       (experts / ep, hidden, 3 * ffn_width) replicate
    mix.weight (hidden, hidden)                      replicate
    scale      (experts / ep, hidden)                replicate
  }}
}}

profile authors {{
  default layer
  slots {{ embedding projected_table  experts routed_bank }}
  kind layer {{ ops {{ {VECTOR} }} }}
}}

model tied : authors {{
  hidden {H}  layers 2  heads 4  vocab {VOCAB}  ffn_width {WIDTH}  tie_embeddings
  moe {{ experts 8  top_k 2  expert_width {WIDTH} }}
}}
"""


def _terms(name: str) -> dict[str, dict[str, float]]:
    registry = compile_sources([Source("authors.hpf", AUTHORS)])
    model = registry.model(name)
    return forward_flops_by_term(bind(model, registry.profile(model.profile), families=registry.families),
                                 batch=BATCH, seq_len=SEQ)


def test_a_tied_head_multiplies_by_the_embeddings_weight_and_its_projection_is_priced() -> None:
    terms = _terms("tied")
    assert terms["output"]["output"] == 2 * TOKENS * VOCAB * H   # the table, read as the head's matrix
    assert terms["embedding"]["embedding"] == 2 * TOKENS * H * H  # project; the lookup is no FLOP


def test_a_tied_head_needs_the_embeddings_weight() -> None:
    """hpdsl/torch/layers.py uses the embedding's `weight`: a table named otherwise is refused (not priced 0)."""
    text = AUTHORS.replace("weight         (vocab, hidden)", "table.weight   (vocab, hidden)").replace(
        "params(weight, project)", "params(table, project)")
    registry = compile_sources([Source("authors.hpf", text)])
    model = registry.model("tied")
    cost_model = bind(model, registry.profile(model.profile), families=registry.families)
    with pytest.raises(UnpricedSlotError, match=r"embed: the model ties its head.*declares no `weight`"):
        model_columns(cost_model)


def test_a_bank_runs_top_k_of_its_experts_per_token_and_a_vector_is_no_matmul() -> None:
    ffn = _terms("tied")["layer"]["ffMM"]
    assert ffn == 2 * TOKENS * (2 * H * 3 * WIDTH + H * H)  # top 2 of 8 experts' banks, and mix for every token


def test_mlas_latent_down_projections_run_on_every_tp_rank() -> None:
    """DeepSeek-V3's q_a_proj and kv_a_proj_with_mqa replicate: on sp; the up- and output projections split over tp."""
    columns = model_columns(example("deepseek_v3"))
    column = next(c for c in columns.columns if c.role == "layer")
    attention = column.matmuls.of("attMM")
    h, dcq, dckv, rope = 7168, 1536, 512, 64
    assert attention.replicated == h * dcq + h * (dckv + rope)
    heads, nope, v = 128, 128, 128
    assert attention.split == dcq * heads * (nope + rope) + dckv * heads * (nope + v) + heads * v * h


def test_an_op_vector_no_layer_holds_prices_no_weight_matmul() -> None:
    """ffMM 4 builds no layer (hpdsl/bound/slots.py; the checker refuses it): no slot, so no matmul, as no parameter."""
    cost_model = dense_model(ops=dict(LLAMA_OPS, ffMM=4))
    terms = forward_flops_by_term(cost_model, batch=BATCH, seq_len=SEQ)["layer"]
    assert terms["ffMM"] == terms["attMM"] == 0
    assert parameters(cost_model).body == 0
    built = forward_flops_by_term(dense_model(), batch=BATCH, seq_len=SEQ)["layer"]
    assert built["ffMM"] == 2 * TOKENS * 3 * 256 * 1024  # ffMM 3: the gated MLP's three matrices
