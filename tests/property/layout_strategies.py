"""Drawn layouts as .hpf text: the conditions strategy, the layout lines, family `drawn` and a model binding it.

Shared by the estimate-equals-build properties (test_layout_estimate_props.py,
parameter counts) and test_layout_matmul_props.py (weight-matmul FLOPs): each
draws its own dims, and both write them, and the one-slot model around them, here.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st
from layout_fixture_modules import Condition, Dim

OPS = "attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"
"""The op counts of the drawn profile's one kind."""
ONE_SHARED_EXPERT = "moe { experts 4  top_k 2  expert_width 24  shared_experts 1  shared_width 40 }"
"""The moe block of a model whose experts (or shared experts) slot holds the drawn family."""


def conditions(flags: Sequence[str], ints: Sequence[str]) -> st.SearchStrategy[Condition]:
    """Draw no condition, a flag set or not, or an int field above a threshold."""
    return st.one_of(st.none(), st.tuples(st.sampled_from(flags), st.booleans()),
                     st.tuples(st.sampled_from(ints), st.sampled_from((1, 2, 16))))


def layout_line(path: str, dims: Sequence[Dim], condition: Condition) -> str:
    """Return one replicated parameter of a layout block, with its condition."""
    return f"    {path} ({', '.join(dim_text(d) for d in dims)}) replicate{condition_text(condition)}"


def dim_text(dim: Dim) -> str:
    """Return a drawn dim as a layout expression: a sum of products."""
    return " + ".join(" * ".join(str(f) for f in term) for term in dim)


def condition_text(condition: Condition) -> str:
    """Return a drawn condition as a layout entry's `if` clause (empty for none)."""
    if condition is None:
        return ""
    name, value = condition
    if isinstance(value, bool):
        return f" if {name}" if value else f" if not {name}"
    return f" if {name} > {value}"


def drawn_family(factory: str, accepts: str, params: Sequence[str], lines: Sequence[str]) -> str:
    """Return family `drawn`: one default variant building `factory`, owning `params`, laid out as `lines`."""
    return (f'family drawn {{\n  factory "{factory}"\n'
            f'  variant only "{factory}" default accepts({accepts}) params({", ".join(params)})\n'
            "  layout {\n" + "\n".join(lines) + "\n  }\n}\n")


def drawn_model(role: str, flags: dict[str, bool], shape: str, blocks: str = "", attention: str = "") -> str:
    """Return a profile binding `drawn` to `role` and two-layer model `drawn_model` that has that slot.

    `shape` states its hidden size and heads, `blocks` its blocks, `attention` the kind's attention flavour line.
    """
    stated = "  ".join(name for name, on in flags.items() if on)
    mtp = "  mtp 1" if role == "mtp_proj" else ""  # the MTP projection is a slot of a model with an MTP layer
    return (f"profile drawn_profile {{\n  default layer\n  slots {{ {role} drawn }}\n"
            f"  kind layer {{\n{attention}    ops {{ {OPS} }}\n  }}\n}}\n"
            f"model drawn_model : drawn_profile {{\n  {shape}  layers 2  vocab 40  ffn_width 48{mtp}\n"
            f"  {stated}\n  {blocks}\n}}\n")
