"""The slot config's dims and flags, drawn, and the one-slot model around family `drawn`.

Shared by the estimate-equals-build properties: test_layout_estimate_props.py
(parameter counts) and test_shard_estimate_props.py (per-rank counts on a mesh).
"""

from __future__ import annotations

from hypothesis import strategies as st
from layout_fixture_modules import Dim
from layout_strategies import ONE_SHARED_EXPERT, drawn_model

INTS = ("hidden", "heads", "head_dim", "kv_heads", "ffn_width", "vocab")
"""The int fields a drawn dim may multiply."""
FLAGS = ("qkv_bias", "mlp_bias", "o_bias", "norm_bias")
"""The flags a drawn condition may test."""

factors = st.one_of(st.sampled_from(INTS), st.integers(1, 3))
dims: st.SearchStrategy[Dim] = st.lists(st.lists(factors, min_size=1, max_size=2).map(tuple),
                                        min_size=1, max_size=2).map(tuple)


def model_text(role: str, flags: dict[str, bool], hidden: int, heads: int) -> str:
    """Return a profile binding `drawn` to `role` and a two-layer model that has that slot."""
    blocks = {"experts": ONE_SHARED_EXPERT,
              "shared_experts": "moe { experts 4  top_k 2  expert_width 24  shared_experts 2  shared_width 40 }",
              "ssm": "ssm { ssm_state 4  ssm_conv 4  ssm_expand 2 }"}.get(role, "")
    return drawn_model(role, flags, f"hidden {hidden}  heads {heads}", blocks,
                       "  attention ssm\n" if role == "ssm" else "")
