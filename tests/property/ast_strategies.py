"""Hypothesis strategies for every AST node, and for whole files.

Everything generated is something the grammar can say: identifiers are never
keywords (the keyword set is read from the grammar's quoted strings), conditions
and stack lists nest recursively, and lists the grammar requires to be non-empty
are non-empty. Spans are left at NO_SPAN (AST equality ignores them) and files
carry no comments; the comment properties inject comments into formatted text.
"""

from __future__ import annotations

import re
from functools import cache

import attrs
from hypothesis import strategies as st

from hpdsl import ast
from hpdsl.model.slots import SLOTS
from hpdsl.resources import data_dir


@cache
def grammar_keywords() -> frozenset[str]:
    """Return every identifier-like quoted string of the grammar (its keywords)."""
    text = (data_dir("grammar") / "hpdsl.lark").read_text()
    return frozenset(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', text))


COMPARE_OPS = ("==", "!=", "<=", ">=", "<", ">")

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(
    lambda s: s not in grammar_keywords())
names = st.builds(ast.Name, identifiers)
# `parallel` is a keyword of family bodies, yet a plain name inside conditions.
condition_names = st.builds(ast.Name, identifiers | st.just("parallel"))

# --------------------------------------------------------------------------
# Literals
# --------------------------------------------------------------------------

# The literal bound is 2^62 (hpdsl/syntax/parser.py MAX_INT).
int_values = st.integers(min_value=-(2**62), max_value=2**62)
int_literals = st.builds(ast.Literal, int_values, st.just("int"))
float_literals = st.builds(ast.Literal, st.floats(allow_nan=False), st.just("float"))
bool_literals = st.builds(ast.Literal, st.booleans(), st.just("bool"))
# Quotes, backslashes, newlines and tabs must be escaped by the formatter.
string_values = st.text(max_size=16) | st.text(alphabet='"\\\n\t x#/', max_size=8)
string_literals = st.builds(ast.Literal, string_values, st.just("string"))
literals = int_literals | float_literals | bool_literals | string_literals


def _tuples(elements: st.SearchStrategy, min_size: int = 0, max_size: int = 4) -> st.SearchStrategy:
    return st.lists(elements, min_size=min_size, max_size=max_size).map(tuple)


# --------------------------------------------------------------------------
# Conditions
# --------------------------------------------------------------------------

operands = literals | names
atoms = st.one_of(
    st.builds(ast.Reference, condition_names),
    st.builds(ast.Constant, st.booleans()),
    st.builds(ast.Comparison, condition_names, st.sampled_from(COMPARE_OPS), operands),
    st.builds(ast.Membership, condition_names, _tuples(operands, 1, 3)),
)


def _compound(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.builds(ast.Negation, children),
        st.builds(ast.AllOf, _tuples(children, 2, 3)),
        st.builds(ast.AnyOf, _tuples(children, 2, 3)),
        st.builds(ast.Implies, children, children),
    )


exprs = st.recursive(atoms, _compound, max_leaves=10)

# --------------------------------------------------------------------------
# Vocabulary, slot bindings and profiles
# --------------------------------------------------------------------------

import_decls = st.builds(ast.ImportDecl, string_literals)
op_decls = st.builds(ast.OpDecl, names, string_literals)
vocabularies = st.builds(ast.Vocabulary, _tuples(op_decls, max_size=5))

# Slot and family names are keywords elsewhere (`attention`, `norm`, `mlp`), plain names here.
slot_names = st.builds(ast.Name, st.sampled_from(sorted(SLOTS))) | names
family_names = st.builds(ast.Name, st.sampled_from(["attention", "norm", "mlp", "embedding"])) | names
slot_bindings = st.builds(ast.SlotBinding, slot_names, family_names)
# Up to 12 bindings, so some blocks pass 120 columns and open up one binding per line.
slots_blocks = st.builds(ast.SlotsBlock, _tuples(slot_bindings, max_size=12))

settings = st.builds(ast.Setting, names, literals)
op_counts = st.builds(ast.OpCount, names, literals)
ops_blocks = st.builds(ast.OpsBlock, _tuples(op_counts, max_size=12))
kind_items = st.one_of(ops_blocks, st.builds(ast.AttentionFlavour, names),
                       st.builds(ast.FfnFlavour, names), slots_blocks)
kinds = st.builds(ast.Kind, names, st.none() | names, _tuples(kind_items, max_size=3))
settings_blocks = st.one_of(
    st.builds(ast.SettingsBlock, st.sampled_from(["run", "model"]), _tuples(settings)),
    st.builds(ast.SettingsBlock, st.just("facts"), _tuples(settings, max_size=8),
              _tuples(string_literals, max_size=2)),
)
profile_items = st.one_of(kinds, st.builds(ast.DefaultKind, names),
                          st.builds(ast.ModelTypes, _tuples(string_literals, 1, 3)),
                          settings_blocks, slots_blocks)
profiles = st.builds(ast.Profile, names, _tuples(profile_items))

# --------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------

int_types = st.builds(ast.IntType, st.none(), st.none()) | st.builds(
    ast.IntType, int_literals, int_literals)
selector_types = st.one_of(st.builds(ast.BoolType), int_types,
                           st.builds(ast.EnumType, _tuples(names, 1, 4)))
selectors = st.builds(ast.Selector, names, selector_types, st.none() | literals | names)
requires = st.builds(ast.Require, exprs, st.none() | string_literals)
param_paths = st.builds(ast.ParamPath, _tuples(names, 1, 3))
variants = st.builds(ast.Variant, names, string_literals, st.booleans(), st.none() | exprs,
                     _tuples(names, max_size=3), _tuples(param_paths, max_size=3))


def _dim_compound(children: st.SearchStrategy) -> st.SearchStrategy:
    products = st.builds(ast.DimProduct, _tuples(children, 1, 3), _tuples(children, 0, 2)).filter(
        lambda p: len(p.factors) + len(p.divisors) >= 2)  # one bare factor is not a product
    return st.builds(ast.DimSum, _tuples(children, 2, 3)) | products


dim_exprs = st.recursive(int_literals | names, _dim_compound, max_leaves=8)
placements = st.builds(ast.Placement, names, st.none() | int_literals)
layout_entries = st.builds(ast.LayoutEntry, param_paths, _tuples(dim_exprs, 1, 3), placements,
                           st.none() | dim_exprs, _tuples(names, max_size=2), st.none() | exprs)
layouts = st.builds(ast.Layout, _tuples(layout_entries, max_size=4))
_flash_words = st.builds(ast.Name, st.sampled_from(["with", "without"]))
# `replicate` and `sequence` exclude each other (one placement word): sequence only where replicate is off.
cost_terms = st.builds(ast.CostTerm, names, names, dim_exprs, st.booleans(), st.none() | names, st.none() | exprs,
                       bytes=st.none() | names, flash=st.none() | _flash_words).flatmap(
    lambda term: st.just(term) if term.replicate else st.builds(attrs.evolve, st.just(term), sequence=st.booleans()))
cost_blocks = st.builds(ast.CostBlock, _tuples(cost_terms, max_size=4))
family_items = st.one_of(st.builds(ast.Factory, string_literals),
                         st.builds(ast.ParallelAxis, names), selectors, requires, variants, layouts, cost_blocks)
families = st.builds(ast.Family, names, _tuples(family_items))

# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

fields = st.builds(ast.Field, names, st.none() | literals)
blocks = st.builds(ast.Block, names, _tuples(fields, max_size=8))
choices = st.builds(ast.Choice, st.builds(ast.Name, st.sampled_from(["norm", "mlp", "activation"])),
                    names)
repeats = st.none() | int_literals
stack_kinds = st.builds(ast.StackKind, names, repeats)
stack_lists = st.recursive(
    st.builds(ast.StackList, _tuples(stack_kinds, 1, 3), repeats),
    lambda children: st.builds(ast.StackList, _tuples(stack_kinds | children, 1, 3), repeats),
    max_leaves=6,
)
stacks = st.builds(ast.Stack, stack_lists)
layer_types = st.builds(ast.LayerTypes, _tuples(names, 1, 12))
model_items = st.one_of(fields, blocks, choices, stacks, layer_types)
models = st.builds(ast.Model, names, st.none() | names, _tuples(model_items, max_size=6))

# --------------------------------------------------------------------------
# Import rules (a profile's `hf { ... }` blocks; dims as in layouts)
# --------------------------------------------------------------------------

hf_ignored = st.builds(ast.HfIgnored, names, st.none() | literals) | st.builds(ast.HfIgnored, string_literals)
hf_rules = st.one_of(
    st.builds(ast.HfDefault, names, st.none() | literals),
    st.builds(ast.HfMap, names, names, st.none() | names,
              values=_tuples(st.builds(ast.HfValue, literals, literals | names), max_size=3)),
    st.builds(ast.HfRead, _tuples(names, 1, 20)),  # up to 20 keys, so some reads pass 120 columns
    st.builds(ast.HfIgnore, string_literals, _tuples(hf_ignored, max_size=16)),
    st.builds(ast.HfPattern, names, _tuples(st.builds(ast.HfSymbol, string_literals, names), max_size=4)),
    st.builds(ast.HfDerive, names, dim_exprs),
)
import_rules = st.builds(ast.ImportRules, _tuples(string_literals, max_size=2), _tuples(hf_rules, max_size=6))
profile_items = profile_items | import_rules
profiles = st.builds(ast.Profile, names, _tuples(profile_items))

# --------------------------------------------------------------------------
# Devices and clusters
# --------------------------------------------------------------------------

numbers = int_literals | float_literals
curves = st.builds(ast.Curve, names, _tuples(st.builds(ast.CurvePoint, numbers, numbers), max_size=6))
devices = st.builds(ast.Device, names, _tuples(settings | curves, max_size=6))
tiers = st.builds(ast.Tier, names, _tuples(settings, max_size=5))
clusters = st.builds(ast.Cluster, names, _tuples(settings | tiers, max_size=4))

# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------

declarations = st.one_of(import_decls, vocabularies, slots_blocks, profiles, families, models, devices, clusters)
files = st.builds(ast.File, st.just("<generated>"), _tuples(declarations, max_size=4))
