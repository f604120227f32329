"""Pipeline parallelism (hpdsl/torch/pipeline.py): the cut against the estimator's, chunks against the whole model,
and real multi-process gloo runs of `hpdsl train --pp` (1F1B, interleaved) against one process and the estimate."""

from __future__ import annotations


import pytest
import torch

from hpdsl.bound.bind import bind
from hpdsl.cost.estimate import estimate
from hpdsl.cost.price.prepare import prepare
from hpdsl.ir.nodes import evolve
from hpdsl.ir.overrides import apply_sets
from hpdsl.model.strategy import Strategy
from hpdsl.torch import build_model, materialize
from hpdsl.torch.pipeline import chunk_spans, model_refusals, rank_chunks, split_model
from torch_support import examples_registry, small_registry
from train_batch import pooled_results
from train_support import (DEEPSEEK_V3, DEEPSEEK_V3_SMALL, MIXTRAL, QWEN3_NEXT, QWEN3_NEXT_SMALL, ROOT,
                           activations_within_ten_percent, clipped_norms_match, hpdsl, matches_one_process,
                           matches_one_process_and_the_estimate, static_bytes_equal)

MIXTRAL_SETS = {"layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2, "vocab": 128, "ffn_width": 96,
                "experts": 4, "expert_width": 32}
MIXTRAL_SMALL = [f"--set={k}={v}" for k, v in MIXTRAL_SETS.items()]



@pytest.mark.parametrize(("layers", "pp", "vpp", "split"), [
    (4, 2, 1, None), (7, 2, 1, None), (7, 2, 2, None), (10, 4, 1, None), (8, 2, 2, (1, 3, 3, 1)),
    (6, 3, 1, (1, 3, 2))])
def test_the_chunks_are_the_estimators(layers: int, pp: int, vpp: int, split: tuple[int, ...] | None) -> None:
    registry = examples_registry()
    model = apply_sets(registry.models["mixtral_8x7b"], {**MIXTRAL_SETS, "layers": layers})
    cost_model = bind(model, registry.profile(model.profile))
    strategy = Strategy(pp=pp, vpp=vpp, pp_split=split, precision="fp32", seq_len=32)
    spans = chunk_spans(layers, strategy)
    layout = prepare(cost_model).layout(pp, vpp, split)
    assert [len(s) for s in spans] == list(layout.chunk_layers)
    assert [r for s in spans for r in s] == list(range(layers))  # every layer once, in order
    stages = estimate(cost_model, strategy).memory.per_stage
    for rank, stage in enumerate(stages):
        assert stage.layers == sum(len(spans[c]) for c in rank_chunks(strategy, rank))


def test_a_split_that_does_not_cover_the_body_is_refused() -> None:
    from hpdsl.errors import BuildError

    with pytest.raises(BuildError, match="must give 4 chunks"):
        chunk_spans(4, Strategy(pp=2, vpp=2, pp_split=(2, 2)))


def test_the_chunks_in_order_compute_the_whole_model() -> None:
    registry = small_registry()
    model_ir = evolve(registry.models["tiny_qwen3_next"], groups=tuple(
        g for g in registry.models["tiny_qwen3_next"].groups if not g.mtp))
    model = materialize(build_model(model_ir, registry=registry), "cpu", seed=0)
    strategy = Strategy(pp=2, vpp=2)
    ids = torch.randint(0, model_ir.vocab, (2, 12), generator=torch.Generator().manual_seed(1))
    chunks = {c: chunk for rank in range(2) for c, chunk in split_model(model, strategy, rank).items()}
    assert sorted(chunks) == [0, 1, 2, 3]
    assert [list(chunks[c].layers) for c in range(4)] == [["0"], ["1"], ["2"], ["3"]]
    assert chunks[0].embed is model.embed and chunks[3].head is model.head and chunks[1].embed is None
    x = ids
    with torch.no_grad():
        for c in range(4):
            x = chunks[c](x)
        assert torch.equal(x, model(ids))
    # The chunks keep the model's parameter names: a rank loads its share of any checkpoint by name.
    names = {n for chunk in chunks.values() for n, _ in chunk.named_parameters()}
    assert names == {n for n, _ in model.named_parameters()}


def test_models_the_pipeline_does_not_cut_are_refused_with_the_reason() -> None:
    registry = examples_registry()
    assert any("encoder-decoder" in r for r in model_refusals(registry.models["t5_small"]))
    # A tied head multiplies by the last stage's copy of the table (tests/torch/test_train_tied_pipeline.py).
    assert model_refusals(evolve(registry.models["llama3_8b"], tie_embeddings=True)) == ()
    assert model_refusals(registry.models["deepseek_v3"]) == ()  # its MTP layer rides on the last stage
    assert model_refusals(registry.models["mixtral_8x7b"]) == ()
    code, output = hpdsl("train", str(ROOT / "examples" / "t5_small.hpf"), "--pp", "2", "--nproc", "2")
    assert code == 2 and "is an encoder-decoder" in output


def _args(spec: str, sets: list[str], nproc: int, *flags: str) -> list[str]:
    return [spec, *sets, "--nproc", str(nproc), "--steps", "3", *flags]


MIXTRAL_TP2_PP2 = {"1f1b": ("--vpp", "1"), "interleaved": ("--vpp", "2"),
                   "split-1-3-recompute-4-micro-batches": ("--pp-split", "1,3", "--recompute", "full",
                                                           "--global-batch", "4"),
                   "1f1b-zero3-the-moe-routes-its-sequence-chunk": ("--vpp", "1", "--zero", "os+grad+params")}
MIXTRAL_PP2_ZERO3 = {"dp2-clipped": ("--dp", "2", "--clip", "0.5"), "dp2-ep2-clipped": ("--dp", "2", "--ep", "2",
                                                                                        "--clip", "0.5"),
                     "cp2": ("--cp", "2")}
DEEPSEEK_V3_PP2 = {"tp2-sp-1f1b": ("--tp", "2", "--sp", "--vpp", "1"),
                   "tp2-sp-interleaved": ("--tp", "2", "--sp", "--vpp", "2"),
                   "dp2-zero3": ("--dp", "2", "--zero", "os+grad+params")}
FOUR = {
    **{f"mixtral-tp2-pp2-{name}": _args(MIXTRAL, MIXTRAL_SMALL, 4, "--tp", "2", "--sp", "--pp", "2", *flags)
       for name, flags in MIXTRAL_TP2_PP2.items()},
    **{f"mixtral-pp2-zero3-{name}": _args(MIXTRAL, MIXTRAL_SMALL, 4, *flags, "--pp", "2", "--zero", "os+grad+params")
       for name, flags in MIXTRAL_PP2_ZERO3.items()},
    **{f"qwen3-next-tp2-pp2-{vpp}": _args(QWEN3_NEXT, QWEN3_NEXT_SMALL, 4, "--tp", "2", "--sp", "--pp", "2",
                                          "--vpp", number) for vpp, number in (("1f1b", "1"), ("interleaved", "2"))},
    "qwen3-next-cp2-pp2": _args(QWEN3_NEXT, QWEN3_NEXT_SMALL, 4, "--cp", "2", "--pp", "2", "--zero", "os+grad+params"),
    **{f"deepseek-v3-pp2-{name}": _args(DEEPSEEK_V3, DEEPSEEK_V3_SMALL, 4, "--pp", "2", *flags)
       for name, flags in DEEPSEEK_V3_PP2.items()},
}
"""The 4-process runs of this file, each checked by its own test: one launch (tests/torch/train_batch.py) with
tests/torch/test_train_recompute.py's and test_train_tied_pipeline.py's."""
four = pooled_results("four", "pipeline", FOUR)
EIGHT = {name: _args(spec, sets, 8, "--dp", "2", "--tp", "2", "--sp", "--pp", "2", "--zero", "os+grad+params")
         for name, spec, sets in (("mixtral", MIXTRAL, MIXTRAL_SMALL), ("qwen3-next", QWEN3_NEXT, QWEN3_NEXT_SMALL),
                                  ("deepseek-v3", DEEPSEEK_V3, DEEPSEEK_V3_SMALL))}
"""The 8-process runs of this file: one launch with tests/torch/test_train.py's."""
eight = pooled_results("eight", "pipeline", EIGHT)




def _stage_bytes(result: dict, part: str) -> dict[int, tuple[int, float]]:
    return {r["coords"]["pp"]: (r["measured"][part], r["estimated"][part]) for r in result["ranks"]}


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", list(MIXTRAL_TP2_PP2))
def test_mixtral_tp2_pp2_matches_one_process_and_the_stage_cut(four: dict[str, dict], name: str) -> None:
    result = four[f"mixtral-tp2-pp2-{name}"]
    matches_one_process(result)
    assert [(r["coords"]["pp"], r["coords"]["tp"]) for r in result["ranks"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    static_bytes_equal(result)  # the embedding and head split over the vocabulary, as the estimator prices them
    # Under full recompute stage 0 keeps 4,096 bytes a micro-batch and the int64 token ids (priced since).
    activations_within_ten_percent(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", list(MIXTRAL_PP2_ZERO3))
def test_mixtral_pp2_under_zero3_holds_exactly_the_estimate_per_stage(four: dict[str, dict], name: str) -> None:
    # dp2·ep2 puts each expert on a one-rank FSDP mesh: its gradient must be divided once (parallelize._divide).
    flags = MIXTRAL_PP2_ZERO3[name]
    result = four[f"mixtral-pp2-zero3-{name}"]
    matches_one_process(result)
    if "--clip" in flags:  # the stages' norms summed over pp (and ep's experts over ep): one process's norm
        clipped_norms_match(result, 0.5)
    static_bytes_equal(result)
    assert _stage_bytes(result, "params_bytes")[0] != _stage_bytes(result, "params_bytes")[1]
    if "--ep" not in flags:  # ep 2: a stage-1 rank's experts get up to 1.6x the balanced tokens (1.14x in all)
        activations_within_ten_percent(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("vpp", ["1f1b", "interleaved"])
def test_qwen3_next_tp2_pp2_matches_one_process_and_the_estimate(four: dict[str, dict], vpp: str) -> None:
    result = four[f"qwen3-next-tp2-pp2-{vpp}"]
    matches_one_process_and_the_estimate(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_qwen3_next_cp2_pp2_hands_the_state_on_inside_each_stage(four: dict[str, dict]) -> None:
    """Gated DeltaNet's cp hand-offs inside pipeline stages (their shape inference runs rank-local)."""
    result = four["qwen3-next-cp2-pp2"]
    matches_one_process(result)
    static_bytes_equal(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", list(DEEPSEEK_V3_PP2))
def test_deepseek_v3_mla_first_k_dense_and_mtp_pp2_match_one_process_and_the_estimate(four: dict[str, dict],
                                                                                       name: str) -> None:
    """The MTP layer and a copy of the embedding on the last stage, the two tables' gradients summed."""
    result = four[f"deepseek-v3-pp2-{name}"]
    matches_one_process_and_the_estimate(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("model", list(EIGHT))
def test_dp2_tp2_pp2_on_8_processes_matches_one_process_and_the_estimate(eight: dict[str, dict], model: str) -> None:
    result = eight[model]
    matches_one_process(result)
    assert sorted((r["coords"]["pp"], r["coords"]["dp_shard"], r["coords"]["tp"]) for r in result["ranks"]) == [
        (p, d, t) for p in range(2) for d in range(2) for t in range(2)]
    static_bytes_equal(result)
    activations_within_ten_percent(result)
