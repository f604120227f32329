"""The one table of diagnostic codes: stable, kebab-case, each with what it means.

docs/diagnostics.md is generated from this table (`python -m hpdsl.diagnostics.codes`),
and a test keeps the two in step.
"""

from __future__ import annotations

CODES: dict[str, str] = {
    # --- syntax and files -------------------------------------------------
    "syntax-error": "the text does not follow the grammar at this token",
    "unexpected-character": "a character that starts no token of the language",
    "unexpected-end": "the file ends inside an unfinished construct",
    "nesting-too-deep": "conditions or stack lists nest deeper than the compiler accepts",
    "literal-too-large": "an integer literal beyond 2^62, the largest the compiler holds",
    "file-too-large": "a file is larger than the compiler reads (256 KiB of text)",
    "line-too-long": "a line is longer than the compiler reads (100,000 characters)",
    "too-many-diagnostics": "a file has more problems than are shown; the rest are left out",
    "import-not-found": "an imported file does not exist or cannot be read",
    "import-cycle": "files import each other in a cycle",
    "import-too-deep": "a chain of imports is longer than the compiler follows (64 files)",
    "import-outside-project": "an import leads outside the project's folders, the standard library and the search paths",
    "no-vocabulary": "profiles are declared but no op vocabulary is in scope",
    "unpriced-vocabulary": "a model is priced with an op vocabulary that lacks ops the estimator prices (they price zero)",
    # --- names ------------------------------------------------------------
    "duplicate-vocabulary": "a second op vocabulary is declared",
    "duplicate-op": "an op is declared twice in the vocabulary",
    "duplicate-profile": "two profiles have the same name",
    "duplicate-family": "two families have the same name",
    "duplicate-model": "two models have the same name",
    "duplicate-kind": "a profile declares a kind twice",
    "duplicate-op-count": "a kind's ops block counts one op twice",
    "duplicate-setting": "a run, model or facts block states a key twice",
    "duplicate-statement": "a statement that may appear once appears twice",
    "duplicate-selector": "a family declares a selector twice",
    "duplicate-variant": "a family declares a variant twice",
    "duplicate-field": "a model states a field twice",
    "duplicate-field-declaration": "a profile or family declares a field twice, or two declarations of one field "
                                   "disagree",
    "duplicate-model-type": "two profiles claim the same HuggingFace model_type",
    "unknown-profile": "a model names a profile that is not declared",
    "unknown-kind": "a name is used as a layer kind but the profile has no such kind",
    "unknown-op": "an ops block counts an op the vocabulary does not declare",
    "unknown-default-kind": "a profile's default names a kind it does not declare",
    # --- profiles ---------------------------------------------------------
    "empty-profile": "a profile declares no layer kind",
    "missing-op-count": "a kind's op vector is incomplete",
    "negative-count": "an op count is negative",
    "count-not-integer": "an op count is not a whole number",
    "unknown-flavour": "an attention or ffn flavour outside its closed set",
    "kind-inheritance-cycle": "kinds inherit from each other in a cycle",
    "unknown-run-fact": "a run block states a key outside the run facts",
    "run-fact-type": "a run fact has a value of the wrong type",
    "unknown-model-fact": "a profile's model block states a key outside the model facts",
    "model-fact-type": "a profile's model fact has a value of the wrong type",
    "unknown-hf-fact": "a profile's facts block states a key no model field has",
    "hf-fact-type": "a profile's facts block gives a value of the wrong type",
    "unknown-model-type": "a profile's facts block names a model_type the profile does not list",
    "flavour-mismatch": "linrec is counted but the attention flavour is not linear, or the reverse",
    # --- import rules (docs/importing.md) -----------------------------------
    "duplicate-import-rule": "an hf block gives one config key two rules of one sort for one model_type",
    "unknown-import-field": "an hf map or derive names a model field that does not exist",
    "unknown-import-key": "an hf read names a config key no built-in import rule reads",
    "bad-pattern-symbol": "an hf pattern mixes one-character symbols (a string's) with names (a list's)",
    "bad-import-value": "an hf map's table states a config value twice, or translates it into a value its field "
                        "does not take",
    "bad-weight-name": "an hf weight rule's sides are not both prefixes or both names, or name other placeholders",
    "bad-weight-split": "an hf weight rule's split states another number of sizes than parts, or a size reads "
                        "a name that is not a model field holding a count",
    # --- slot bindings ----------------------------------------------------
    "unknown-slot": "a slots block binds a name that is not a slot",
    "unknown-family": "a slots block binds a slot to a family that is not declared",
    "duplicate-slot": "a slot is bound twice in one slots block, or in two top-level slots blocks",
    "model-slot-in-kind": "a kind binds a slot a model has once (embedding, head)",
    "unbound-slot": "a profile a model uses leaves a slot without a family",
    # --- families ---------------------------------------------------------
    "missing-factory": "a family names no factory",
    "invalid-import-path": "an import path is not of the form 'package.module:Name'",
    "unknown-axis": "a name is used as a parallel axis but is not tp, cp, ep or pp",
    "reserved-name": "a selector is named like an axis or 'parallel'",
    "selector-field-type": "a selector is named like a model field but cannot take the field's values, so it never follows the model",
    "invalid-int-range": "an int selector's range is empty",
    "duplicate-enum-value": "an enum selector lists a value twice",
    "selector-default-type": "a selector's default is outside the selector's type",
    "unknown-selector": "a condition names a selector the family does not declare",
    "condition-type": "a condition compares values of different types",
    "parallel-without-axis": "a condition uses 'parallel' but the family declares no parallel axis",
    "no-variants": "a family declares no variant",
    "no-default-variant": "a family has no default variant",
    "multiple-default-variants": "a family marks more than one variant default",
    "variant-overlap": "some selector and axis assignment matches two variants",
    "variant-gap": "some selector and axis assignment matches no variant",
    "variant-unreachable": "no allowed assignment selects this variant",
    "require-unsatisfiable": "no assignment satisfies a family's require constraints",
    "duplicate-argument": "a variant's accepts(...) lists an argument twice",
    # --- tensor-parallel layouts ------------------------------------------
    "unknown-placement": "a layout entry's placement is not colwise, rowwise or replicate",
    "placement-argument": "a replicated parameter names a split dim or a `by` unit",
    "duplicate-layout-entry": "a layout places one parameter of a variant twice",
    "duplicate-parameter": "a variant's params(...) lists a parameter twice",
    "unknown-dim-field": "a dims expression names something that is not a slot-config field or cp, ep, pp",
    "unknown-cost-unit": "a cost term's unit is not flops or saved",
    "unknown-cost-term": "a cost term names a term the estimator does not price",
    "nonlinear-cost-term": "a cost term's expression is not linear in `keys`",
    "unknown-recompute": "a cost term's `recompute` names something other than selective",
    "saved-term-keys": "a saved term reads `keys` but is no score tensor (`without flash`), or is one not per key",
    "saved-term-recompute": "a saved term's `recompute selective` and flash clause disagree",
    "saved-term-kernel": "a saved term's byte class, split and flash clause disagree",
    "unknown-saved-bytes": "a saved term's `at` names no byte class the estimator knows",
    "saved-only-clause": "a FLOP term states `sequence`, `at` or a flash clause, which only a saved term says",
    "unpriced-activations": "a kind's ssm or linear_attention mixer is a family that declares no `saved` term",
    "layout-condition-type": "a layout entry's `if` uses a flag as a number or a number as a flag",
    "unpriced-slot": "a slot's family has no layout, or one the estimator cannot evaluate on the model's dims",
    "unknown-variant": "a layout entry's `for` names a variant the family does not declare",
    "missing-parameters": "a family has a layout but a variant declares no params(...)",
    "undeclared-parameter": "a layout entry places a parameter none of its variants declares",
    "unplaced-parameter": "a variant declares a parameter the layout does not place",
    "shard-dim-out-of-range": "a placement splits a tensor dim the parameter's dims do not have",
    "shard-not-divisible": "a model's sharded dim does not split over a tp the family allows",
    # --- models and stacks ------------------------------------------------
    "unknown-field": "a model states a field the language does not know",
    "field-redeclared": "a field declaration gives a standard field, a bound value or an axis another meaning",
    "bad-field-declaration": "a field declaration's type, bounds and default do not hold together",
    "field-outside-profile": "a field is declared at the top level of a file outside the standard library",
    "unknown-field-block": "a field declaration names a block models do not have",
    "field-type": "a model field has a value of the wrong type",
    "missing-field": "a model lacks a required dimension",
    "non-positive-field": "a model dimension that must be positive is zero or negative",
    "field-too-large": "a model dimension is above the largest the compiler accepts for it",
    "unknown-choice": "a norm, mlp or activation value outside its closed set",
    "heads-not-divisible": "the query heads are not a multiple of the kv heads",
    "missing-moe-dims": "the stack uses a MoE kind but the model declares no moe block",
    "missing-linear-dims": "the stack uses a linear-attention kind but the model declares no linear block",
    "incomplete-block": "a moe, linear or mla block lacks a field it needs",
    "top-k-exceeds-experts": "a moe block chooses more experts per token than it has",
    "missing-shared-count": "a moe block gives shared experts a width or gate but no count",
    "stack-count-mismatch": "the stack's body layers do not sum to the model's layer count",
    "stack-zero-count": "a stack group or repetition has a count below one",
    "stack-too-large": "an explicit stack expands to more layers than a model may have",
    "too-many-groups": "a stack or layer_types makes more runs of one kind than a model may have",
    "stack-conflict": "a model states both an explicit stack and layer_types",
    "stack-needs-default": "a stack must be derived but the profile names no default kind",
    "odd-encoder-decoder": "an encoder/decoder stack needs an even layer count",
    "layer-types-too-short": "layer_types lists fewer layers than the model has",
    "kind-dim-field": "a kind's dims set a field a kind may not set (only its layers' head shapes and attention flags)",
    "layer-types-unknown-kind": "layer_types names a kind the profile lacks (priced as the default)",
    # --- layers the backend builds (hpdsl/bound/shape.py) -----------------
    "layer-attentions": ("a kind prices an attention count no layer holds (attMM not 4 or 8, nor 0 with a "
                         "feed-forward)"),
    "cross-attention-outside-decoder": "a kind prices two attentions outside an encoder-decoder's decoder",
    "ffn-matrices": "a kind prices a feed-forward count no block has (ffMM neither 0, 2 nor 3)",
    "mlp-form-mismatch": "the model's mlp gated|plain disagrees with its layers' ffMM (3 gated, 2 plain)",
    "norm-count-mismatch": "a layer's norms (layer_norms, else normOp) are not the ones its wiring holds",
    "rotary-dims": "rotary_fraction turns no dims of a head, more than it has, or an odd number of them",
    "wiring-mismatch": "a parallel wiring on a layer that is not one attention beside a feed-forward",
    "value-heads-not-divisible": "linear attention's value heads are not a multiple of its key heads",
    "mla-qk-norm": "a model with an mla block states qk_norm, which MLA has no place for",
    "mla-indexer": "an mla block's DSA indexer has no query latent to read, or a head narrower than rope_dim",
    "encoder-decoder-stack": "an encoder-decoder has layers neither tower holds (other kinds, MTP)",
    "outer-wiring": ("the model's outer wiring contradicts its other fields (position_offset without learned "
                     "positions, alibi beside position_buckets, an encoder-decoder's or MTP model's embed_width)"),
    # --- devices and clusters ---------------------------------------------
    "duplicate-device": "two devices share a name",
    "duplicate-cluster": "two clusters share a name",
    "unknown-machine-key": "a device, cluster or tier sets a key it does not have (hpdsl/model/machine.py)",
    "missing-machine-key": "a device, cluster or tier leaves out a key it must state",
    "duplicate-machine-key": "a device, cluster or tier sets a key twice",
    "bad-machine-value": "a device, cluster or tier value has the wrong type or is out of range",
    "bad-curve": "an efficiency curve is unknown, repeated, empty, or its sizes do not rise",
    "bad-tier": "a cluster's tiers: none within a node, or two at one scope",
    "unknown-device": "a cluster names a device that is not in scope",
}


def render_table() -> str:
    """Return the Markdown table of every code, for docs/diagnostics.md."""
    rows = ["| code | meaning |", "| --- | --- |"]
    rows += [f"| `{code}` | {meaning} |" for code, meaning in CODES.items()]
    head = "# Diagnostic codes\n\nGenerated from `hpdsl/diagnostics/codes.py`; every code is stable.\n\n"
    return head + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render_table(), end="")
