"""DeepSeek Sparse Attention priced: the indexer's parameters, replication over tp and FLOPs.

The published DeepSeek-V3.2 config imported, against the same model without its three index
fields (DeepSeek-V3's MLA): the difference is the indexer alone (docs/cost-model.md,
"DeepSeek Sparse Attention").
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from hpdsl.api import bind_model, compile_paths
from hpdsl.bound.bind import CostModel
from hpdsl.bound.slots import kind_bindings, layer_slots
from hpdsl.cost.estimate import estimate
from hpdsl.cost.facts.params import parameters
from hpdsl.cost.facts.replication import replicated_numel
from hpdsl.cost.facts.columns import model_columns
from hpdsl.cost.formulas.flops import layer_flop_terms
from hpdsl.importers.hf import import_hf_config
from hpdsl.model.strategy import Strategy
from tests.importers.hf_configs import published

ROOT = Path(__file__).resolve().parents[2]
H, Q_LATENT, HEADS, DIM = 7168, 1536, 64, 128  # tests/data/hf/deepseek_v3_2.json
INDEXER = Q_LATENT * HEADS * DIM + H * DIM + 2 * DIM + H * HEADS  # wq_b, wk, k_norm (weight, bias), weights_proj
INDEX_FIELDS = ("    index_n_heads 64\n", "    index_head_dim 128\n", "    index_topk 2048\n")


@cache
def _models(root: str) -> tuple[CostModel, CostModel]:
    """Return DeepSeek-V3.2 as imported and the same model without its indexer, bound as `hpdsl estimate` binds."""
    stdlib = compile_paths([ROOT / "profiles", ROOT / "families"])
    text = import_hf_config(published("deepseek_v3_2"), profiles=stdlib.profiles, name="dsv32").text
    assert all(line in text for line in INDEX_FIELDS)
    dense = text.replace("model dsv32", "model dense")
    for line in INDEX_FIELDS:
        dense = dense.replace(line, "")
    paths = []
    for name, body in (("dsv32", text), ("dense", dense)):
        path = Path(root) / f"{name}.hpf"
        path.write_text(body, encoding="utf-8")
        paths.append(path)
    return bind_model([paths[0]]), bind_model([paths[1]])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[CostModel, CostModel]:
    return _models(str(tmp_path_factory.mktemp("dsa")))


def test_the_indexer_is_the_whole_difference_and_replicated(models) -> None:
    indexed, dense = models
    assert parameters(indexed).total - parameters(dense).total == 61 * INDEXER == 851_524_864
    splits = []
    for model in (indexed, dense):
        mixer = layer_slots(model.kind_config("moe"), kind_bindings(model, "moe"))[1]
        assert mixer.role == "mla"
        splits.append(replicated_numel(model.families["mla"], mixer))
    (sharded, replicated), (dense_sharded, dense_replicated) = splits
    assert (sharded, replicated - dense_replicated) == (dense_sharded, INDEXER)


def test_the_indexer_is_whole_on_every_tp_rank(models) -> None:
    indexed, dense = models
    layers = 62  # 61 body layers and the MTP layer, one pipeline stage
    for tp in (1, 8):
        strategy = Strategy(tp=tp, ep=tp, global_batch=8, sequence_parallel=tp > 1)
        (ours,), (bare,) = (estimate(m, strategy).memory.per_stage for m in (indexed, dense))
        assert ours.params_bytes - bare.params_bytes == layers * INDEXER * 2  # bf16 weights, not divided by tp


def test_the_indexer_flops_are_its_projections_and_its_scores_per_key(models) -> None:
    indexed, dense = models
    ours, bare = (layer_flop_terms(m.kind_config("moe"), model_columns(m).layer_column("moe").matmuls)
                  for m in (indexed, dense))
    assert ours["attMM"].sp - bare["attMM"].sp == 2 * (Q_LATENT * HEADS * DIM + H * (DIM + HEADS))
    assert ours["attMM"].t == bare["attMM"].t
    assert (ours["indexer"].w_ts, ours["indexer"].ts, bare["indexer"].w_ts) == (2 * HEADS * (DIM + 1), 0.0, 0.0)
    strategy = Strategy(tp=8, ep=8, global_batch=8, seq_len=4096, sequence_parallel=True)
    more = estimate(indexed, strategy).flops.model_total - estimate(dense, strategy).flops.model_total
    per_token = 2 * (Q_LATENT * HEADS * DIM + H * (DIM + HEADS)) + 2 * HEADS * (DIM + 1) * 4096
    assert more == pytest.approx(3 * 62 * 8 * 4096 * per_token)  # forward and backward, 8 sequences, MTP too
