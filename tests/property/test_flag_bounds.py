"""Any strategy the flags state is either refused with reasons or priced to finite, non-negative numbers.

`hpdsl estimate` and `hpdsl search` build their inputs with estimate_from_flags / search_from_flags
(hpdsl/cli/cost.py) from the flags click parsed; values reach 2^63-1 on the
command line, so every one must be bounded (hpdsl/cost/facts/bounds.py) or it wraps in
the pricing's int64 arrays and comes back negative, infinite or NaN with exit 0.
"""

from __future__ import annotations

import math
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hpdsl.cli.cost import estimate_from_flags, search_from_flags
from hpdsl.cost.facts.bounds import MAX_DEVICES, MAX_GLOBAL_BATCH, MAX_MICRO_BATCH, MAX_SEQ_LEN
from hpdsl.errors import HpdslError

ROOT = Path(__file__).resolve().parents[2]
INT_MAX = 2**63 - 1

# Small values (that price), powers of two up to 2^63-1 and the edges of every bound.
WHOLE = st.one_of(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 4096]), st.integers(0, 63).map(lambda e: 2**e),
                  st.sampled_from([0, -1, INT_MAX, -INT_MAX - 1, MAX_DEVICES, MAX_DEVICES + 1,
                                   MAX_SEQ_LEN, MAX_SEQ_LEN + 1, MAX_GLOBAL_BATCH, MAX_MICRO_BATCH]),
                  st.integers(-INT_MAX - 1, INT_MAX))
ESTIMATE_INTS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len",
                 "recompute_layers", "softmax_bytes", "num_devices")
WORDS: dict[str, list[Any]] = {
    "recompute": ["none", "selective", "full"], "zero": ["none", "os", "os+grad", "os+grad+params"],
    "cp_kind": ["ring", "a2a"], "flash_attention": [True, False], "sequence_parallel": [True, False],
    "precision": ["bf16-mixed", "fp8-mixed", "fp32"], "mfu": [0.4, 1.0, 1e-300],
}


@cache
def _cost_model(name: str) -> Any:
    from hpdsl.cli.models import load_cost_model

    return load_cost_model([ROOT / "examples" / f"{name}.hpf"], None, stdlib=True)


def _bad_numbers(node: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [bad for key, value in node.items() for bad in _bad_numbers(value, f"{path}.{key}")]
    if isinstance(node, (list, tuple)):
        return [bad for i, value in enumerate(node) for bad in _bad_numbers(value, f"{path}[{i}]")]
    if isinstance(node, (int, float)) and not isinstance(node, bool) and not (math.isfinite(node) and node >= 0):
        return [(path, node)]
    return []


@st.composite
def estimate_flags(draw: st.DrawFn) -> dict[str, Any]:
    """Draw a few estimate flags, as click hands them over (unset ones absent)."""
    names = draw(st.lists(st.sampled_from([*ESTIMATE_INTS, *WORDS]), min_size=1, max_size=5, unique=True))
    return {name: draw(WHOLE) if name in ESTIMATE_INTS else draw(st.sampled_from(WORDS[name]))
            for name in names}


_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(st.sampled_from(["llama3_8b", "mixtral_8x7b", "qwen3_next_80b_a3b"]), estimate_flags())
# Every bound at once, consistent: 2^24 devices, a billion-token sequence, 2^40 sequences per step.
@example("llama3_8b", {"dp": 2**16, "tp": 8, "pp": 32, "micro_batch": MAX_MICRO_BATCH,
                       "global_batch": MAX_GLOBAL_BATCH, "seq_len": MAX_SEQ_LEN, "flash_attention": False,
                       "softmax_bytes": 64, "num_devices": MAX_DEVICES})
@example("llama3_8b", {"dp": 4234602716407823281, "micro_batch": 4})  # wrapped to negative FLOPs
@example("llama3_8b", {"pp": 2**44, "vpp": 2**47})  # wrapped to a valid pp·vpp, then OverflowError
@example("llama3_8b", {"global_batch": -(2**63), "cp": 16})  # read as "unstated"
@example("qwen3_next_80b_a3b", {"mfu": 1e-300, "global_batch": 10**12})  # step time inf (bench/fuzz.py, seed 4)
def test_accepted_estimate_flags_price_to_finite_non_negative_numbers(spec: str, flags: dict[str, Any]) -> None:
    try:
        result = estimate_from_flags(_cost_model(spec), flags)
    except HpdslError as error:
        assert str(error)
        return
    assert not _bad_numbers(result.to_json()), (flags, _bad_numbers(result.to_json())[:4])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["llama3_8b", "mixtral_8x7b"]),
       st.sampled_from([1, 8, 64, 720720, MAX_DEVICES, MAX_DEVICES + 1, INT_MAX]),
       st.fixed_dictionaries({}, optional={"top": WHOLE, "seq_len": WHOLE, "global_batch": WHOLE,
                                           "micro_batches": st.sampled_from(["1,2", "2", "0", str(INT_MAX)])}))
def test_accepted_search_flags_price_to_finite_non_negative_numbers(spec: str, devices: int,
                                                                   flags: dict[str, Any]) -> None:
    try:
        result = search_from_flags(_cost_model(spec), {**flags, "devices": devices})
    except HpdslError as error:
        assert str(error)
        return
    assert not _bad_numbers(result.to_json()), (devices, flags, _bad_numbers(result.to_json())[:4])


M = 2**31  # MAX_DIMENSION: every dimension field at its maximum
AT_MAXIMUM = {
    "llama3_8b": (f"hidden={M}", f"heads={M}", f"kv_heads={M}", f"vocab={M}", f"ffn_width={M}", "layers=65536",
                  f"head_dim={M}"),
    "mixtral_8x7b": (f"hidden={M}", f"experts={M}", f"top_k={M}", f"expert_width={M}", "layers=65536", f"vocab={M}"),
    "deepseek_v3": (f"hidden={M}", "layers=65536", f"q_lora_rank={M}", f"kv_lora_rank={M}", f"rope_dim={M}",
                    f"nope_dim={M}", f"v_head_dim={M}", f"experts={M}", "shared_experts=1024"),
    "qwen3_next_80b_a3b": (f"hidden={M}", "layers=65536", f"key_heads={M}", f"value_heads={M}",
                           f"key_head_dim={M}", f"value_head_dim={M}", f"conv={M}"),
}


@pytest.mark.parametrize("spec", sorted(AT_MAXIMUM))
def test_every_field_and_flag_at_its_maximum_prices_finite_and_exact(spec: str) -> None:
    from hpdsl.api import bind_model
    from hpdsl.cost import parameters
    from hpdsl.ir.overrides import parse_sets

    cost_model = bind_model([ROOT / "examples" / f"{spec}.hpf"], None, sets=parse_sets(AT_MAXIMUM[spec]))
    flags = {"dp": 2**16, "tp": 1, "pp": 1, "micro_batch": MAX_MICRO_BATCH, "global_batch": MAX_GLOBAL_BATCH,
             "seq_len": MAX_SEQ_LEN, "flash_attention": False, "softmax_bytes": 64}
    started = time.process_time()
    result = estimate_from_flags(cost_model, flags).to_json()
    assert time.process_time() - started < 10
    assert not _bad_numbers(result), _bad_numbers(result)[:4]
    assert result["params"]["total"] == parameters(cost_model).total > 2**62  # exact Python ints, no wrap
