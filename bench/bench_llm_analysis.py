"""One strategy priced by hpdsl beside llm-analysis, interleaved in one run, for Llama-2-7B.

For each strategy (tp, pp, dp, micro-batch, global batch, ZeRO stage,
recompute) on A100 80GB, times in interleaved rounds, best of each (the least
disturbed by other load on the machine):

- hpdsl `estimate(prepared, strategy)` (the model's Prepared held): the public scalar API, validation,
  pricing through the model's compiled plan and the Estimate it returns;
- hpdsl as a grid of one (`grid_estimate`, what `estimate` ran before the
  compiled plan: the vectorised numpy code on arrays of length one);
- llm-analysis `LLMAnalysis(...).training(...)` for the same model, GPU,
  parallelism, batch and ZeRO stage (its logging silenced, as a caller would).

The first strategy of a shape (layout, recompute, ZeRO, precision, device) is
priced on floats ("1st"), the second compiles the shape's plan ("2nd"); both
one-off costs are reported apart from the steady state ("hpdsl"). Target (issue 11): hpdsl's estimate at
least 5x faster than llm-analysis. Needs the bench extra (`pip install
hpdsl[bench]`; llm-analysis pins old transformers and huggingface-hub, so
`pip install --no-deps llm-analysis fire termcolor` beside a current stack works too).

    .venv/bin/python bench/bench_llm_analysis.py [--rounds 7] [--number 200]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpdsl.api import bind_model
from hpdsl.cost import Strategy, estimate
from hpdsl.cost.estimate import grid_estimate
from hpdsl.cost.price.prepare import prepare

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = (  # tp, pp, dp, micro_batch, global_batch, zero, recompute
    (1, 1, 8, 1, 64, "os", "none"),
    (2, 1, 4, 1, 32, "os", "selective"),
    (4, 2, 2, 2, 64, "os+grad", "full"),
    (8, 1, 1, 1, 16, "none", "full"),
    (2, 4, 4, 1, 128, "os+grad+params", "selective"),
)
ZERO_STAGES = {"none": 0, "os": 1, "os+grad": 2, "os+grad+params": 3}
RECOMPUTE = {"none": 0, "selective": 1, "full": 2}


def llm_analysis_pricer(tp: int, pp: int, dp: int, micro: int, batch: int, zero: str, recompute: str
                        ) -> Callable[[], Any]:
    """Return a call of llm-analysis's training analysis for one strategy."""
    from llm_analysis import logger as la_logger
    from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
    from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                     get_model_config_by_name)

    la_logger.logger.setLevel(logging.ERROR)
    model = get_model_config_by_name("NousResearch_Llama-2-7b-hf")
    gpu = get_gpu_config_by_name("a100-sxm-80gb")
    dtype = get_dtype_config_by_name("w16a16e16")

    def price() -> Any:
        analysis = LLMAnalysis(model, gpu, dtype, ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp),
                               flops_efficiency=0.5)
        return analysis.training(batch_size_per_gpu=micro, global_batch_size=batch, seq_len=4096,
                                 ds_zero=DSZeRO(ZERO_STAGES[zero]),
                                 activation_recomputation=ActivationRecomputation(RECOMPUTE[recompute]))

    return price


def per_call(fn: Callable[[], Any], number: int) -> float:
    """Return the mean seconds of one call over `number` calls."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def main() -> None:
    """Time the three pricers per strategy in interleaved rounds and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=200)
    args = parser.parse_args()
    cost_model = bind_model([ROOT / "examples" / "llama2_7b.hpf"])
    prepared = prepare(cost_model)  # held: its PriceCache keeps the compiled plans between calls
    rows = []
    for tp, pp, dp, micro, batch, zero, recompute in STRATEGIES:
        strategy = Strategy(tp=tp, pp=pp, dp=dp, micro_batch=micro, global_batch=batch, seq_len=4096,
                            zero=zero, recompute=recompute, device="a100", mfu=0.5)
        start = time.perf_counter()
        estimate(prepared, strategy)  # the first of its shape: priced on floats
        first = time.perf_counter() - start
        start = time.perf_counter()
        estimate(prepared, strategy)  # the second compiles the shape's plan
        second = time.perf_counter() - start
        pricers = {"hpdsl": lambda s=strategy: estimate(prepared, s),
                   "grid of one": lambda s=strategy: grid_estimate(prepared, s),
                   "llm-analysis": llm_analysis_pricer(tp, pp, dp, micro, batch, zero, recompute)}
        best = {name: float("inf") for name in pricers}
        for round_ in range(args.rounds):
            order = list(pricers.items())
            for name, fn in (order if round_ % 2 == 0 else order[::-1]):
                number = max(1, args.number // 10) if name == "grid of one" else args.number
                best[name] = min(best[name], per_call(fn, number))
        rows.append((f"tp{tp} pp{pp} dp{dp} mb{micro} gb{batch} {zero}/{recompute}", first, second, best))
    print(f"{'Llama-2-7B strategy':<48}{'hpdsl us':>10}{'1st us':>8}{'2nd ms':>8}{'grid of one us':>16}"
          f"{'llm-analysis us':>17}{'llm-analysis / hpdsl':>22}")
    ratios = []
    for label, first, second, best in rows:
        ratio = best["llm-analysis"] / best["hpdsl"]
        ratios.append(ratio)
        print(f"{label:<48}{best['hpdsl'] * 1e6:>10.1f}{first * 1e6:>8.0f}{second * 1e3:>8.1f}"
              f"{best['grid of one'] * 1e6:>16.1f}{best['llm-analysis'] * 1e6:>17.1f}{ratio:>21.1f}x")
    median = statistics.median(ratios)
    print(f"median: hpdsl's estimate is {median:.1f}x faster than llm-analysis "
          f"(target >= 5x: {'met' if median >= 5 else 'NOT met'}); "
          f"slowest strategy {min(ratios):.1f}x")


if __name__ == "__main__":
    main()
