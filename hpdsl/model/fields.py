"""Every model field, declared once: its type, meaning, default, block and HuggingFace config keys.

A field's name is the same everywhere: the key written in a `.hpf` model (inside
its block for block fields), the key of the model in registry.json, the
attribute of the bound layer config (hpdsl/model/layer.py) and of the config a
module is built from, the name a family's layout dims read, and the row of the
importer's table. The checker (hpdsl/check/model_fields.py), the IR, the importer
(hpdsl/importers/hf.py) and docs/language.md's field list all read FIELDS.
The fields are declared in the standard library, fields/model.hpf; FIELDS is
read from the table generated beside it (hpdsl/ir/lower_fields.py). Adding a
standard field is adding a declaration there (docs/language.md, "Adding a
field"); an author declares more in a profile or a family (AUTHOR fields: the
checker and the IR carry them, not FIELDS).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Literal, Union

import attrs

from hpdsl.resources import data_dir

Scalar = Union[bool, int, float, str]
FieldType = Literal["int", "float", "bool", "string", "choice"]


@attrs.frozen
class Field:
    """One model field.

    `default` is the value a consumer uses when the model does not state the
    field (None: absent, and nothing is priced or built for it); `hf` are the
    config keys it is imported from, the first one stated winning.
    """

    name: str
    type: FieldType
    meaning: str
    block: str | None = None
    minimum: int | None = None
    default: Scalar | None = None
    required: bool = False
    hf: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    maximum: int | None = None


# The most layers a model may have (body and MTP each): far above any real model,
# and low enough that expanding, pricing and writing a stack stays quick.
MAX_LAYERS = 1 << 20

# The most layer groups (maximal runs of one kind; body and MTP each) a model may
# have: what a registry stores and the compiler walks grows with the groups, not the
# layers, so a short spec cannot ask for a huge registry (an alternating stack of
# MAX_LAYERS layers would be MAX_LAYERS groups).
MAX_GROUPS = 1 << 16

# The largest value of any other int field: products of two stay below 2^63.
MAX_DIMENSION = 1 << 31

# The most shared experts: each is a module (a slot) of its own, so the count is enumerated.
MAX_SHARED_EXPERTS = 1 << 10

# The largest op count or run fact: the largest integer literal (hpdsl/syntax/parser.py MAX_INT).
MAX_COUNT = 1 << 62


def table_path() -> Path:
    """Return fields/model.fields.json: the standard declarations (fields/model.hpf) as a table."""
    return data_dir("fields") / "model.fields.json"


def _read_table() -> dict[str, Field]:
    rows = json.loads(table_path().read_text(encoding="utf-8"))
    return {row["name"]: Field(**{**row, "hf": tuple(row["hf"]), "choices": tuple(row["choices"])})
            for row in rows}


# Read from the generated table, not parsed from fields/model.hpf: `import hpdsl` stays fast
# (bench/bench_startup.py), and tests/model/test_fields.py holds the table equal to the .hpf.
FIELDS: dict[str, Field] = _read_table()

KEYWORD_CHOICES: tuple[str, ...] = ("norm", "mlp", "activation", "wiring")
"""Choice fields a model states as `norm layernorm` (grammar keywords); any other is `rope_type "yarn"`."""

# .get: while `python -m hpdsl.ir.lower_fields` rewrites a table that lacks the field, the import must not fail.
WIRINGS: tuple[str, ...] = FIELDS["wiring"].choices if "wiring" in FIELDS else ()
"""The block wirings a layer may have (`wiring`): where its norms stand and where the residual adds go."""
"""Every model field, top-level ones first, then each block's, in the order fmt and docs list them."""

BLOCKS: tuple[str, ...] = tuple(dict.fromkeys(f.block for f in FIELDS.values() if f.block is not None))
"""The blocks a model may hold (`moe { }`, `linear { }`, `ssm { }`, `mla { }`)."""


def top_level(*, kinds: tuple[FieldType, ...] | None = None) -> dict[str, Field]:
    """Return the fields written at a model's top level (of the given types, default all)."""
    return {n: f for n, f in FIELDS.items() if f.block is None and (kinds is None or f.type in kinds)}


def block_fields(block: str) -> dict[str, Field]:
    """Return the fields of one block, in table order."""
    return dict(_block_fields(block))


def block_facts() -> dict[str, Field]:
    """Return the block fields a profile's facts may state: every block's flags (`router_bias`, `shared_gate`)
    and the moe block's counts (`shared_experts`: Llama 4's one shared expert, which its configs leave unsaid)."""
    return {n: f for n, f in FIELDS.items()
            if f.block is not None and (f.type == "bool" or (f.block == "moe" and f.type == "int"))}


@cache
def _block_fields(block: str) -> tuple[tuple[str, Field], ...]:
    return tuple((n, f) for n, f in FIELDS.items() if f.block == block)


@cache
def required(block: str | None) -> tuple[str, ...]:
    """Return the fields a model (block None) or a stated block must state (the table is constant)."""
    return tuple(n for n, f in FIELDS.items() if f.block == block and f.required)


def defaults() -> dict[str, Scalar | None]:
    """Return every field's default (None where absent means nothing is built)."""
    return {n: f.default for n, f in FIELDS.items()}


def check_names(values: Mapping[str, object], *, where: str) -> None:
    """Raise KeyError naming the first key of `values` that is not a field."""
    for name in values:
        if name not in FIELDS:
            raise KeyError(f"{where}: '{name}' is not a model field")


# --------------------------------------------------------------------------
# Profile-level tables: run facts and a profile's `model { }` facts
# --------------------------------------------------------------------------


@attrs.frozen
class Fact:
    """A run fact or profile model fact: type, meaning and default."""

    name: str
    type: Literal["int", "bool"]
    meaning: str
    default: int | bool | None
    minimum: int | None = None


RUN_FACTS: dict[str, Fact] = {fact.name: fact for fact in (
    # Unstated (None): from the strategy's precision and optimizer (hpdsl/cost/facts/precision.py).
    Fact("grad_bytes", "int", "bytes per gradient element (unstated: the precision's)", None, 0),
    Fact("optimizer_state_bytes", "int", "bytes per optimizer-state element (unstated: the optimizer's)",
         None, 0),
    Fact("optimizer_states", "int", "optimizer states per parameter (unstated: the optimizer's)", None, 0),
    Fact("main_param_bytes", "int", "bytes of the master copy per parameter (unstated: the precision's)",
         None, 0),
    Fact("norm_bytes", "int", "bytes per saved normalisation input element", 4, 0),
    Fact("dropout_bytes", "int", "bytes per dropout-mask element", 0, 0),
    Fact("grad_accumulation", "bool", "gradients take memory even without pipeline parallelism", True),
    Fact("shard_activations", "bool", "TP shards the activations between layers and the output layer's", False),
    Fact("loss_parallel", "bool", "the loss runs on vocab-sharded logits", True),
    Fact("reshard_params", "bool", "FSDP frees a layer's gathered parameters after it has run", False),
    Fact("deferred_grad_accumulation", "bool", "the micro-batches' gradients accumulate unsharded and ZeRO reduces "
         "them once, after the last backward", False),
    Fact("overlapped_grad_reduce", "bool", "gradient reduction overlaps the backward pass", False),
    Fact("fused_grad_accumulation", "bool", "the backward's weight-gradient matmuls add into the accumulated "
         "gradients (Megatron's gradient_accumulation_fusion); false: every micro-batch after the first sums its "
         "gradients into them, memory-bound", True),
    # transformers' modules (--impl hf-sdpa / hf-eager; docs/cost-model.md#activations-per-implementation).
    Fact("norm_keeps_input", "bool", "the norm scales its compute-width input, not its fp32 copy, by the root "
         "(its backward keeps both)", False),
    Fact("loss_upcast", "bool", "the loss takes fp32 logits (false: log-softmax at the compute width)", True),
    # What hpdsl's torch backend does (hpdsl/cost/facts/backend.py sets them for `hpdsl train`).
    Fact("gathered_tp_input", "bool", "under SP a tensor-parallel region gathers the sequence before its first "
         "linears, which keep the gathered input (false: they keep their chunk)", False),
    Fact("routed_tokens_split", "bool", "each tp rank routes its own share of the tokens (false: every tp rank "
         "routes the whole sequence)", True),
    Fact("cp_gathered_kv", "bool", "context parallelism all-gathers the keys and values, which attention keeps "
         "whole with its mask (false: ring attention passes chunks)", False),
    Fact("cpu_attention", "bool", "SDPA runs on CPU: its math kernel where CPU flash cannot", False),
)}
"""The only run facts a profile may state (`run { }`), with the value an unstated fact has."""

PROFILE_MODEL_FACTS: dict[str, Fact] = {
    "v_head_dim": Fact("v_head_dim", "int", "value head dim the profile prices MLA attention with", None, 1),
}
"""The keys of a profile's `model { }` block."""

__all__ = ["BLOCKS", "FIELDS", "Fact", "Field", "FieldType", "PROFILE_MODEL_FACTS", "RUN_FACTS", "Scalar", "WIRINGS",
           "block_fields", "block_facts", "check_names", "defaults", "required", "top_level"]


def render_table() -> str:
    """Return the Markdown table of every model field that docs/language.md embeds."""
    rows = ["| field | block | type | meaning | default | HuggingFace keys |", "|---|---|---|---|---|---|"]
    for field in FIELDS.values():
        kind = f"{field.type} ≥ {field.minimum}" if field.minimum is not None else field.type
        if field.choices:
            kind = " \\| ".join(field.choices)
        default = "required" if field.required else ("–" if field.default is None else str(field.default).lower())
        keys = ", ".join(f"`{key}`" for key in field.hf) or "–"
        rows.append(f"| `{field.name}` | {field.block or '–'} | {kind} | {field.meaning} | {default} | {keys} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render_table(), end="")
