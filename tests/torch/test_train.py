"""`hpdsl train` and hpdsl.torch.parallelize: overrides, refusals, and real 4-process gloo runs of a scaled Mixtral."""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import pytest

from hpdsl.cli.models import load_cost_model
from hpdsl.errors import InputError
from hpdsl.ir.overrides import apply_sets, parse_sets
from hpdsl.ir.stack import layer_kinds
from hpdsl.model.strategy import Strategy
from hpdsl.torch.parallelize import refusals
from torch_support import examples_registry
from train_batch import pooled_results, shared, train_batch
from train_support import (DEEPSEEK_V3, DEEPSEEK_V3_SMALL, MIXTRAL, QWEN3_NEXT, QWEN3_NEXT_SMALL, ROOT,
                           activations_within_ten_percent, hpdsl, matches_one_process,
                           matches_one_process_and_the_estimate, static_bytes_equal)
from train_support import MIXTRAL_SMALL as SMALL



def test_set_parses_typed_values_and_block_fields_by_name() -> None:
    assert parse_sets(["layers=4", "moe.experts=8", "qk_norm=false", "norm=layernorm"]) == {
        "layers": 4, "experts": 8, "qk_norm": False, "norm": "layernorm"}


@pytest.mark.parametrize(("pair", "named"), [("bogus=1", "'bogus' is not a model field"),
                                            ("layers=x", "layers takes a whole number"),
                                            ("layers=0", "layers must be at least 1"),
                                            ("norm=batchnorm", "norm takes one of rmsnorm, layernorm"),
                                            ("layers", "FIELD=VALUE")])
def test_a_bad_set_is_a_usage_error_naming_it(pair: str, named: str) -> None:
    with pytest.raises(InputError, match=named):
        parse_sets([pair])
    code, output = hpdsl("estimate", MIXTRAL, "--set", pair)
    assert code == 2 and named in output


def test_set_layers_keeps_the_hybrid_pattern() -> None:
    model = examples_registry().models["qwen3_next_80b_a3b"]
    small = apply_sets(model, {"layers": 4, "experts": 4, "top_k": 2})
    assert layer_kinds(g for g in small.groups if not g.mtp) == layer_kinds(model.groups)[:4]
    assert small.layers == 4 and small.experts == 4


def test_estimate_takes_set() -> None:
    code, output = hpdsl("estimate", MIXTRAL, *SMALL, "--json")
    assert code == 0
    assert json.loads(output)["params"]["total"] < 200_000


@pytest.mark.parametrize(("changes", "reason"), [
    ({"pp": 2, "global_batch": 1}, "pp=2 with 1 micro-batches: 1F1B needs at least pp micro-batches"),
    ({"vpp": 2}, "vpp=2 without pp > 1"),
    ({"dp": 2, "zero": "os"}, "zero=os under dp·cp=2: FSDP2 always shards the parameters"),
    ({"dp": 2, "zero": "os+grad"}, "zero=os+grad under dp·cp=2: FSDP2 always shards the parameters"),
    ({"tp": 2, "zero": "os+grad"}, "zero=os+grad under tp=2: FSDP2 cannot shard the experts'"),
    ({"dp": 2}, "zero=none under dp·cp=2"),
    ({"dp": 2, "ep": 4, "zero": "os+grad"}, "ep=4 must divide dp=2"),
    ({"dp": 2, "tp": 2, "ep": 2, "etp": 2, "zero": "os+grad+params"}, "ep·etp=4 must divide dp=2"),
    ({"dp": 1, "tp": 2, "etp": 2}, "ep·etp=2 must divide dp=1"),
    ({"cp": 2, "cp_kind": "a2a"}, "cp_kind=a2a at cp=2: this backend builds the ring form of cp"),
])
def test_what_fsdp2_and_this_backend_cannot_express_is_refused(changes: dict, reason: str) -> None:
    assert any(reason in r for r in refusals(Strategy(**changes)))
    assert refusals(Strategy(dp=2, zero="os+grad+params")) == ()
    assert refusals(Strategy(dp=4, ep=2, etp=2, zero="os+grad+params")) == ()
    assert refusals(Strategy(cp=2, zero="os+grad+params")) == ()


def test_train_refuses_pp_with_the_reason_and_a_wrong_process_count() -> None:
    code, output = hpdsl("train", MIXTRAL, *SMALL, "--pp", "2", "--global-batch", "1", "--nproc", "2")
    assert code == 2 and "1F1B needs at least pp micro-batches" in output
    code, output = hpdsl("train", MIXTRAL, *SMALL, "--dp", "2", "--zero", "os+grad+params", "--nproc", "4")
    assert code == 2 and "does not match" in output


def _mixtral(*flags: str) -> list[str]:
    return [MIXTRAL, *SMALL, "--nproc", "4", "--steps", "3", *flags]


ZERO3 = ("--zero", "os+grad+params")
FOUR = {
    "mixtral-dp4-ep2": _mixtral("--dp", "4", "--ep", "2", *ZERO3),
    "mixtral-dp4-ep2-etp2": _mixtral("--dp", "4", "--ep", "2", "--etp", "2", *ZERO3),
    "mixtral-dp2-tp2-full-recompute": _mixtral("--dp", "2", "--tp", "2", "--sp", *ZERO3, "--recompute", "full"),
    "mixtral-dp2-tp2": _mixtral("--dp", "2", "--tp", "2", "--sp", *ZERO3),
    "mixtral-cp2-ep2": _mixtral("--dp", "2", "--cp", "2", "--ep", "2", *ZERO3),
    "qwen3-next-dp4-ep2": [QWEN3_NEXT, *QWEN3_NEXT_SMALL, "--dp", "4", "--ep", "2", *ZERO3, "--nproc", "4"],
    "qwen3-next-dp2-tp2": [QWEN3_NEXT, *QWEN3_NEXT_SMALL, "--dp", "2", "--tp", "2", "--sp", *ZERO3, "--nproc", "4"],
    **{f"deepseek-v3-{name}": [DEEPSEEK_V3, *DEEPSEEK_V3_SMALL, *flags, *ZERO3, "--nproc", "4"]
       for name, flags in (("dp4-ep2", ("--dp", "4", "--ep", "2")), ("dp2-tp2-sp", ("--dp", "2", "--tp", "2", "--sp")))},
    **{f"{name}-cp2-ep2": [spec, *small, "--dp", "2", "--cp", "2", "--ep", "2", *ZERO3, "--nproc", "4"]
       for name, spec, small in (("qwen3-next", QWEN3_NEXT, QWEN3_NEXT_SMALL),
                                 ("deepseek-v3", DEEPSEEK_V3, DEEPSEEK_V3_SMALL))},
}
"""The 4-process runs of this file, one launch (tests/torch/train_batch.py), each checked by its own test."""
EIGHT = {name: [MIXTRAL, *SMALL, "--nproc", "8", "--steps", "3", "--dp", "4", "--ep", "2", "--etp", "2", *ZERO3, *flags]
         for name, flags in (("tp2-sp", ("--tp", "2", "--sp")), ("pp2", ("--pp", "2", "--global-batch", "8")))}
"""The 8-process runs of this file: one launch with tests/torch/test_train_pipeline.py's (tests/torch/train_batch.py)."""
eight = pooled_results("eight", "train", EIGHT)
LLAMA_TP2 = [str(ROOT / "examples" / "llama2_7b.hpf"), "--set=layers=2", "--set=hidden=64", "--set=heads=4",
             "--set=kv_heads=2", "--set=vocab=128", "--set=ffn_width=96", "--tp", "2", "--nproc", "2"]
TWO = {"llama-tied-tp2": [*LLAMA_TP2, "--set=tie_embeddings=true"], "llama-mtp-tp2": [*LLAMA_TP2, "--set=mtp=1"]}
"""The 2-process run of this file: one launch with tests/torch/test_train_etp_alone.py's."""
two = pooled_results("two", "train", TWO)


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Return the result of every run of FOUR, by name (`hpdsl train ARGS --validate --json`)."""
    return shared("train-4", tmp_path_factory, lambda: train_batch(FOUR))


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_dp4_ep2_on_fsdp2_matches_one_process_and_the_estimate(four: dict[str, dict]) -> None:
    result = four["mixtral-dp4-ep2"]
    assert [r["coords"]["ep"] for r in result["ranks"]] == [0, 1, 0, 1]
    # ZeRO-3 over dp 4 (experts over the 2 ranks holding the same experts): the accounting agrees.
    matches_one_process_and_the_estimate(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_dp4_ep2_etp2_splits_the_experts_width_and_matches_one_process_and_the_estimate(four: dict[str, dict]
                                                                                        ) -> None:
    result = four["mixtral-dp4-ep2-etp2"]
    assert [(r["coords"]["ep"], r["coords"]["etp"]) for r in result["ranks"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # Each rank holds half the experts at half their width; the experts' ZeRO group dp·cp·tp/(ep·etp) is 1.
    matches_one_process_and_the_estimate(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", list(EIGHT))
def test_dp4_ep2_etp2_on_eight_processes_with_tp_or_pp_matches_one_process_and_the_estimate(
        eight: dict[str, dict], name: str) -> None:
    result = eight[name]
    # Under sp each tp rank routes its own chunk to its etp peers at the same tp place.
    matches_one_process_and_the_estimate(result)




@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_dp2_tp2_with_full_recompute_matches_one_process_and_the_estimate(four: dict[str, dict]) -> None:
    result = four["mixtral-dp2-tp2-full-recompute"]
    assert {r["coords"]["tp"] for r in result["ranks"]} == {0, 1}
    # Embedding and head split over the vocabulary, the experts' ZeRO over dp·tp: every rank as priced.
    matches_one_process_and_the_estimate(result)  # each layer's input chunk, the head's gathered input, the loss


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_dp2_tp2_zero3_matches_one_process_and_the_estimate(four: dict[str, dict]) -> None:
    result = four["mixtral-dp2-tp2"]
    # Sequence parallel: norms, residual stream and the MoE (each tp rank routes its own chunk) at 1/tp.
    matches_one_process_and_the_estimate(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_mixtral_cp2_ep2_matches_one_process_and_the_estimate(four: dict[str, dict]) -> None:
    result = four["mixtral-cp2-ep2"]
    assert {(r["coords"]["cp"], r["coords"]["ep"]) for r in result["ranks"]} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    matches_one_process_and_the_estimate(result)


def test_set_refuses_more_chosen_experts_than_experts() -> None:
    model = examples_registry().models["qwen3_next_80b_a3b"]
    with pytest.raises(InputError, match="top_k 10 chooses more experts than the 4 there are"):
        apply_sets(model, {"experts": 4})


def test_set_refuses_routing_groups_that_do_not_divide_the_experts() -> None:
    # examples/deepseek_v3.hpf routes within 4 of 8 groups (the published config): 4 experts cannot be 8 groups.
    model = examples_registry().models["deepseek_v3"]
    with pytest.raises(InputError, match="router_groups 8 does not divide the 4 experts; .*state a divisor"):
        apply_sets(model, {"experts": 4, "top_k": 2})
    scaled = apply_sets(model, {"experts": 4, "top_k": 2, "router_groups": 2, "router_group_top": 1})
    assert (scaled.router_groups, scaled.router_group_top) == (2, 1)


def test_set_mtp_cuts_the_mtp_layers() -> None:
    model = examples_registry().models["qwen3_next_80b_a3b"]
    assert not any(g.mtp for g in apply_sets(model, {"mtp": 0}).groups)
    assert sum(g.count for g in apply_sets(model, {"mtp": 2}).groups if g.mtp) == 2


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_qwen3_next_hybrid_dp4_ep2_matches_one_process(four: dict[str, dict]) -> None:
    result = four["qwen3-next-dp4-ep2"]
    # The shared-expert gate [1, hidden] splits on hidden (parallelize's even placement): every rank as priced.
    matches_one_process_and_the_estimate(result)


@pytest.mark.parametrize(("recompute", "layers"), [("full", None), ("selective", None), ("full", 1)])
def test_recompute_keeps_the_loss_and_gradients_and_saves_less(recompute: str, layers: int | None) -> None:
    import torch
    import torch.nn.functional as F

    from hpdsl.torch import build_model, materialize, parallelize
    from hpdsl.torch.measure import saved_activations
    from torch_support import small_registry

    ids = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(0))
    runs = []
    # fp32: bf16-mixed (Strategy's default) needs FSDP2's MixedPrecisionPolicy, so a mesh (parallelize refuses it).
    plain = Strategy(precision="fp32")
    for strategy in (plain, plain.with_(recompute=recompute, recompute_layers=layers)):
        model = parallelize(materialize(build_model("tiny_moe", registry=small_registry()), "cpu", seed=0), strategy)
        with saved_activations(model) as saved:
            loss = F.cross_entropy(model(ids).reshape(-1, 96), ids.reshape(-1))
        loss.backward()
        runs.append((loss.item(), [p.grad.clone() for p in model.parameters()], saved[0]))
    (loss, grads, plain), (again, regrads, less) = runs
    assert again == pytest.approx(loss, rel=1e-6)
    for grad, regrad in zip(grads, regrads):
        torch.testing.assert_close(regrad, grad)
    assert less < plain


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_qwen3_next_dp2_tp2_matches_one_process_and_the_estimate_on_every_rank(four: dict[str, dict]) -> None:
    result = four["qwen3-next-dp2-tp2"]
    # The shared-expert gate [1, hidden] splits on hidden, so FSDP2 leaves no rank more than priced.
    # Priced as the backend runs (hpdsl/cost/facts/backend.py): the gathered inputs of the tp regions kept whole.
    matches_one_process_and_the_estimate(result)


def test_search_run_refuses_a_precision_train_does_not_run() -> None:
    code, output = hpdsl("search", MIXTRAL, *SMALL, "--devices", "4", "--precision", "fp8-mixed", "--run")
    assert code == 2 and "--run trains precision fp32 or bf16-mixed only, not fp8-mixed" in output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_search_run_trains_the_bf16_mixed_strategy_it_picks() -> None:
    # Whatever the search ranks first on 2 devices trains at bf16-mixed (under the device time model it is dp 2;
    # tests/torch/test_trainer.py trains the one-data-parallel-rank case, FSDP2 over a one-rank mesh, too).
    code, output = hpdsl("search", MIXTRAL, *SMALL, "--devices", "2", "--global-batch", "2", "--seq-len", "32",
                         "--micro-batches", "1", "--precision", "bf16-mixed", "--top", "3", "--run", "--json")
    assert code == 0, output
    result = json.loads(output)
    trained, strategy = result["train"], result["trained"]["strategy"]
    assert strategy["precision"] == "bf16-mixed"
    assert result["trained"]["place"] == 1  # nothing the search ranks first is refused
    assert len(trained["loss"]) == 3 and all(math.isfinite(loss) for loss in trained["loss"])
    assert "reference_loss" not in trained  # one process would train fp32: no --validate at bf16-mixed
    static_bytes_equal(trained)  # fp32 weights (the master), gradients and moments: 16 bytes a parameter


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_search_run_on_8_devices_trains_the_strategy_it_chose_on_8_processes() -> None:
    from hpdsl.cli.train import runnable_reasons
    from hpdsl.cost.search import search

    code, output = hpdsl("search", MIXTRAL, *SMALL, "--devices", "8", "--global-batch", "8", "--seq-len", "32",
                          "--micro-batches", "1", "--top", "3", "--run", "--json")
    assert code == 0, output
    result = json.loads(output)
    trained = result["train"]
    assert len(trained["ranks"]) == 8 and len(result["search"]["top"]) == 3
    # The chosen one: the fastest of the ranking (the 200 --run asks for) that the torch backend runs.
    cost_model = load_cost_model([Path(MIXTRAL)], None, stdlib=True, sets=[s.removeprefix("--set=") for s in SMALL])
    ranked = search(cost_model, 8, None, top=200, global_batch=8, seq_len=32, micro_batches=(1,),
                    precision="fp32", optimizer="adam", zero=("os+grad+params",)).top
    place, chosen = next((i, e) for i, e in enumerate(ranked, 1) if not runnable_reasons(e.strategy))
    best = chosen.strategy
    assert result["trained"] == {"place": place, "strategy": json.loads(json.dumps(attrs.asdict(best)))}
    sizes = {axis: 1 + max(r["coords"][axis] for r in trained["ranks"]) for axis in trained["ranks"][0]["coords"]}
    assert (sizes["pp"], sizes["dp_shard"] * sizes["ep"] * sizes["etp"], sizes["cp"], sizes["tp"], sizes["ep"],
            sizes["etp"]) == (best.pp, best.dp, best.cp, best.tp, best.ep, best.etp)
    for rank in trained["ranks"]:  # what it trained is what the search priced, stage by stage
        stage = chosen.memory.per_stage[rank["coords"]["pp"]]
        priced = {"params_bytes": stage.params_bytes, "grads_bytes": stage.grads_bytes,
                  "optimizer_bytes": stage.optimizer_bytes, "activation_peak_bytes": stage.activation_bytes}
        assert {part: rank["estimated"][part] for part in priced} == priced
    matches_one_process_and_the_estimate(trained)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tied_head_reads_the_vocabulary_split_table_under_tp(two: dict[str, dict]) -> None:
    result = two["llama-tied-tp2"]
    matches_one_process(result)
    static_bytes_equal(result)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_mtp_layers_projection_is_split_and_gathered_over_tp_as_its_layout_says(two: dict[str, dict]) -> None:
    """Without sequence parallelism (a dense model): eh_proj colwise, its output gathered (families/projection.hpf)."""
    result = two["llama-mtp-tp2"]
    matches_one_process(result)
    static_bytes_equal(result)  # the untied, vocabulary-split table's gradient too: each rank keeps its rows
    activations_within_ten_percent(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("mesh", ["dp4-ep2", "dp2-tp2-sp"])
def test_deepseek_v3_mla_first_k_dense_and_mtp_match_one_process(four: dict[str, dict], mesh: str) -> None:
    result = four[f"deepseek-v3-{mesh}"]
    # MLA on CPU runs SDPA's math kernel (v narrower than q/k), priced by the cpu_attention fact.
    matches_one_process_and_the_estimate(result)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("model", ["qwen3-next", "deepseek-v3"])
def test_gated_deltanet_and_mla_cp2_ep2_match_one_process_and_the_estimate(four: dict[str, dict], model: str
                                                                           ) -> None:
    """Gated DeltaNet hands its state and convolution inputs rank to rank; MLA gathers keys and values over cp."""
    result = four[f"{model}-cp2-ep2"]
    assert {(r["coords"]["cp"], r["coords"]["ep"]) for r in result["ranks"]} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    # Gated DeltaNet keeps the received convolution tail and state once per sequence (hpdsl/cost/formulas/handoff.py).
    matches_one_process_and_the_estimate(result)


def test_mtp_layers_are_built_trained_and_priced_without_pp() -> None:
    """The MTP layer and its loss are built wherever the estimator prices them, sequence parallelism included."""
    import torch

    from hpdsl.torch import build_model, materialize
    from hpdsl.torch.objective import MTP_WEIGHT, draw, objective, window
    from hpdsl.torch.sequence import model_refusals

    model_ir = apply_sets(examples_registry().models["deepseek_v3"], parse_sets([s.removeprefix("--set=")
                                                                              for s in DEEPSEEK_V3_SMALL]))
    assert model_refusals(model_ir) == ()
    model = materialize(build_model(model_ir, registry=examples_registry(), include_mtp=True), "cpu", seed=0)
    ids, labels = window(draw(0, 0, 2, 8, 128, depth=1), slice(None), slice(0, 8), 1)
    logits = model(ids)
    assert ids.shape == labels.shape == (2, 8, 2) and logits.shape == (2, 16, 128)
    main = torch.nn.functional.cross_entropy(logits[:, :8].flatten(0, 1), labels[..., 0].flatten())
    extra = torch.nn.functional.cross_entropy(logits[:, 8:].flatten(0, 1), labels[..., 1].flatten())
    assert objective(logits, labels).item() == pytest.approx(main.item() + MTP_WEIGHT * extra.item(), rel=1e-6)
    torch.testing.assert_close(logits[:, :8], model(ids[..., 0]))
    code, output = hpdsl("estimate", DEEPSEEK_V3, *DEEPSEEK_V3_SMALL, "--precision", "fp32", "--json")
    priced = json.loads(output)["memory"]["per_stage"][0]["params_bytes"]
    assert code == 0 and priced == 4 * sum(p.numel() for p in model.parameters())