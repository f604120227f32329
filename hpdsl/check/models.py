"""Models into diagnostics: profile, fields, blocks, choices and the layer stack.

Fields are checked against the field table (hpdsl/model/fields.py) and the author
fields the model's profile and the families declare; the stack is resolved
by hpdsl/ir/stack.py, whose problems are reported here, so lowering derives the
same groups the checks saw. Every check reports and carries on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from hpdsl import ast
from hpdsl.diagnostics import NO_SPAN, Collector, Note, Span, did_you_mean
from hpdsl.ir.lower_fields import author_fields
from hpdsl.ir.stack import StackProblem, keyword_span, model_stack, stack_kind_names
from hpdsl.model import ops as OP
from hpdsl.model.fields import BLOCKS, FIELDS, Field, block_fields, required, top_level
from hpdsl.scope import DEFAULT_PROFILE, Scope, kind_flavours, model_profile, profile_default, profile_kinds


# The names a model body may start a statement with, for did-you-mean hints.
_TOP_FIELDS = top_level(kinds=("int", "float", "bool", "string"))
_STATEMENTS = (*top_level(), *BLOCKS, "stack", "layer_types")

# Problems an explicit stack has whatever the profile: reported even when it is unknown.
_STRUCTURAL = ("stack-zero-count", "stack-count-mismatch", "stack-too-large", "too-many-groups")

_ARTICLES = {"int": "an int", "float": "a number", "bool": "a bool", "string": "a string"}


def check_models(scope: Scope, collector: Collector) -> None:
    """Report every problem with the models in scope."""
    for model in _models(scope):
        _check_model(model, scope, collector)
        _check_priceable(model, scope, collector)


def _check_priceable(model: ast.Model, scope: Scope, collector: Collector) -> None:
    """Report a model whose op vocabulary lacks ops the estimator prices (they would price zero)."""
    if scope.vocabulary is None:
        return  # reported once, as no-vocabulary
    missing, _ = OP.unpriced(scope.op_names)
    if missing:
        collector.warning(model.name.span, "unpriced-vocabulary",
                        f"model '{model.name.value}' is priced with an op vocabulary that lacks "
                        f"{_quoted(missing)}: its layers would price those as zero",
                        hint="declare every op the estimator prices (hpdsl/model/ops.py): "
                             + ", ".join(OP.PRICED),
                        notes=(Note(scope.vocabulary.span, "the vocabulary is declared here"),))


def _models(scope: Scope) -> Iterator[ast.Model]:
    """Yield every model declaration, duplicates included, so each body is checked."""
    for file in scope.files:
        yield from (item for item in file.items if isinstance(item, ast.Model))


def _check_model(model: ast.Model, scope: Scope, collector: Collector) -> None:
    profile = _resolve_profile(model, scope, collector)
    # The author fields its profile and the families declare (hpdsl/check/fields.py checks them).
    author = author_fields(scope, model_profile(model))
    top = {**_TOP_FIELDS, **{n: f for n, f in author.items() if f.block is None}}
    fields = _check_fields(_of(model.items, ast.Field), top, "model", collector)
    blocks = _check_blocks(model, author, collector)
    _check_duplicates(model, collector)
    _check_choices(model, collector)
    _check_required(model, author, collector)
    _check_heads(fields, collector)
    _check_positions(fields, collector)
    _check_stack(model, profile, set(blocks), collector)


def _of(items: Iterable[object], kind: type | tuple[type, ...]) -> list[Any]:
    return [item for item in items if isinstance(item, kind)]


# --------------------------------------------------------------------------
# Profile
# --------------------------------------------------------------------------


def _resolve_profile(model: ast.Model, scope: Scope, collector: Collector) -> ast.Profile | None:
    """Return the model's profile, reporting a name that is not declared."""
    name = model_profile(model)
    profile = scope.profiles.get(name)
    if profile is not None:
        return profile
    if model.profile is None:
        collector.error(model.name.span, "unknown-profile",
                        f"model '{model.name.value}' names no profile, and no '{DEFAULT_PROFILE}' "
                        "profile is in scope",
                        hint="name its profile: `model NAME : PROFILE { ... }`")
    else:
        collector.error(model.profile.span, "unknown-profile",
                        f"model '{model.name.value}' names profile '{name}', which is not declared",
                        hint=did_you_mean(name, scope.profiles))
    return None


# --------------------------------------------------------------------------
# Fields, blocks and choices
# --------------------------------------------------------------------------


def _check_fields(fields: Iterable[ast.Field], table: dict[str, Field], where: str,
                  collector: Collector) -> dict[str, ast.Field]:
    """Report unknown, duplicate, mistyped and too-small fields; return the sound ones by name."""
    sound: dict[str, ast.Field] = {}
    seen: dict[str, ast.Field] = {}
    for field in fields:
        name = field.name.value
        if name not in table:
            _unknown_field(field.name, table, where, collector)
        elif name in seen:
            _duplicate(field.name, seen[name].name, collector)
        else:
            seen[name] = field
            if _field_sound(field, table[name], collector):
                sound[name] = field
    return sound


def _unknown_field(name: ast.Name, table: dict[str, Field], where: str,
                   collector: Collector) -> None:
    value = name.value
    if where == "model" and value in BLOCKS:
        hint = f"'{value}' is a block: write `{value} {{ ... }}`"
    else:
        hint = did_you_mean(value, (*_STATEMENTS, *table) if where == "model" else table)
    collector.error(name.span, "unknown-field",
                    f"{_where(where)} has no field '{value}'", hint=hint)


def _where(where: str) -> str:
    return "a model" if where == "model" else f"a {where} block"


def _duplicate(name: ast.Name, first: ast.Name, collector: Collector) -> None:
    collector.error(name.span, "duplicate-field", f"'{name.value}' is stated twice",
                    hint="keep one of them", notes=(Note(first.span, "first stated here"),))


def _field_sound(field: ast.Field, field_spec: Field, collector: Collector) -> bool:
    """Report a field whose value has the wrong type or is below its minimum."""
    name, value = field.name.value, field.value
    wanted = _ARTICLES[field_spec.type]
    if value is None:
        if field_spec.type == "bool":
            return True
        collector.error(field.name.span, "field-type",
                        f"'{name}' is stated alone, which only a bool flag may be; it takes {wanted}",
                        hint=f"give it a value: `{name} N` ({field_spec.meaning})")
        return False
    if not (value.kind == field_spec.type or (field_spec.type == "float" and value.kind == "int")):
        collector.error(value.span, "field-type",
                        f"'{name}' takes {wanted}, found {_describe(value)}",
                        hint=_type_hint(name, field_spec))
        return False
    number = value.value
    if field_spec.minimum is not None and isinstance(number, (int, float)) and number < field_spec.minimum:
        collector.error(value.span, "non-positive-field",
                        f"'{name}' must be at least {field_spec.minimum}, found {value.value}",
                        hint=f"'{name}' means: {field_spec.meaning}")
        return False
    if field_spec.maximum is not None and isinstance(number, int) and number > field_spec.maximum:
        collector.error(value.span, "field-too-large",
                        f"'{name}' may be at most {field_spec.maximum:,}, found {number:,}",
                        hint=f"'{name}' means: {field_spec.meaning}; check the digits")
        return False
    return True


def _describe(value: ast.Literal) -> str:
    """Return a literal as found: its kind and its text."""
    if value.kind == "bool":
        return f"the bool `{str(value.value).lower()}`"
    if value.kind == "string":
        return f'the string "{value.value}"'
    return f"the {value.kind} `{value.value}`"


def _type_hint(name: str, field_spec: Field) -> str:
    if field_spec.type == "bool":
        return f"write `{name}` alone for true, or `{name} false`"
    return f"'{name}' is the {field_spec.meaning}"


def _check_blocks(model: ast.Model, author: dict[str, Field],
                  collector: Collector) -> dict[str, dict[str, ast.Field]]:
    """Check each block's name and fields (the standard ones and the author's); return the sound ones."""
    blocks: dict[str, dict[str, ast.Field]] = {}
    for block in _of(model.items, ast.Block):
        name = block.name.value
        if name not in BLOCKS:
            hint = (f"'{name}' is a field: write `{name} VALUE`" if name in _TOP_FIELDS
                    else did_you_mean(name, BLOCKS))
            collector.error(block.name.span, "unknown-field", f"a model has no block '{name}'",
                            hint=hint)
            continue
        declared = {**block_fields(name), **{n: f for n, f in author.items() if f.block == name}}
        fields = _check_fields(block.fields, declared, name, collector)
        blocks.setdefault(name, fields)
        _check_block_complete(block, author, collector)
    if "moe" in blocks:
        _check_top_k(blocks["moe"], collector)
        _check_shared(blocks["moe"], collector)
    return blocks


def _check_block_complete(block: ast.Block, author: dict[str, Field], collector: Collector) -> None:
    name = block.name.value
    stated = {field.name.value for field in block.fields}
    needed = (*required(name), *(n for n, f in author.items() if f.block == name and f.required))
    missing = [field for field in needed if field not in stated]
    if missing:
        collector.error(block.name.span, "incomplete-block",
                        f"the {name} block lacks {_quoted(missing)}",
                        hint=f"a {name} block states {_quoted(needed)}")


def _check_top_k(moe: dict[str, ast.Field], collector: Collector) -> None:
    experts, top_k = moe.get("experts"), moe.get("top_k")
    if experts is None or top_k is None or experts.value is None or top_k.value is None:
        return
    chosen, available = top_k.value.value, experts.value.value
    if not isinstance(chosen, (int, float)) or not isinstance(available, (int, float)):
        return  # a wrong type is reported by the field check
    if chosen > available:
        collector.error(top_k.value.span, "top-k-exceeds-experts",
                        f"top_k {top_k.value.value} chooses more experts than the "
                        f"{experts.value.value} there are",
                        hint="top_k is the experts chosen per token, at most `experts`")


def _check_shared(moe: dict[str, ast.Field], collector: Collector) -> None:
    """Report a shared width or gate without shared experts: it would price nothing."""
    shared = moe.get("shared_experts")
    count = None if shared is None or shared.value is None else shared.value.value
    if isinstance(count, (int, float)) and count > 0:
        return
    stated = [field for name, field in moe.items() if name in ("shared_width", "shared_gate")
              and (field.value is None or field.value.value is not False)]
    if stated:
        collector.error(stated[0].name.span, "missing-shared-count",
                        f"the moe block states '{stated[0].name.value}' but no shared experts "
                        "(`shared_experts` is 0 or unstated)",
                        hint="state how many shared experts there are: `shared_experts N` "
                             "(each shared_width wide, or expert_width when unstated)")


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _check_duplicates(model: ast.Model, collector: Collector) -> None:
    """Report a second block of one name, and a second stack or layer_types."""
    seen: dict[str, ast.Name] = {}
    for block in _of(model.items, ast.Block):
        if block.name.value in seen:
            _duplicate(block.name, seen[block.name.value], collector)
        else:
            seen.setdefault(block.name.value, block.name)
    _check_stack_statements(model, collector)


def _check_stack_statements(model: ast.Model, collector: Collector) -> None:
    statements = _of(model.items, (ast.Stack, ast.LayerTypes))
    firsts: dict[type, ast.Stack | ast.LayerTypes] = {}
    for statement in statements:
        word = "stack" if isinstance(statement, ast.Stack) else "layer_types"
        span = keyword_span(statement.span, word)
        first = firsts.get(type(statement))
        if first is not None:
            collector.error(span, "duplicate-field", f"the model states `{word}` twice",
                            hint=f"keep one `{word}`", notes=(Note(first.span, "first stated here"),))
            continue
        firsts[type(statement)] = statement
        other = firsts.get(ast.LayerTypes if word == "stack" else ast.Stack)
        if other is not None:
            collector.error(span, "stack-conflict",
                            "the model states both an explicit stack and layer_types",
                            hint="keep one: the stack, or the layer_types it is derived from",
                            notes=(Note(other.span, "the other is stated here"),))


def _check_choices(model: ast.Model, collector: Collector) -> None:
    seen: dict[str, ast.Name] = {}
    for choice in _of(model.items, ast.Choice):
        key, value = choice.key.value, choice.value.value
        if key in seen:
            _duplicate(choice.key, seen[key], collector)
            continue
        seen[key] = choice.key
        allowed = FIELDS[key].choices
        if value not in allowed:
            collector.error(choice.value.span, "unknown-choice",
                            f"'{value}' is not a {key}; the {key} choices are {_quoted(allowed)}",
                            hint=did_you_mean(value, allowed))


def _check_required(model: ast.Model, author: dict[str, Field], collector: Collector) -> None:
    stated = {field.name.value for field in _of(model.items, ast.Field)}
    needed = (*required(None), *(n for n, f in author.items() if f.block is None and f.required))
    missing = [name for name in needed if name not in stated]
    if missing:
        collector.error(model.name.span, "missing-field",
                        f"model '{model.name.value}' lacks {_quoted(missing)}",
                        hint="every model states " + _quoted(needed))


def small_divisors(n: int, most: int) -> list[int]:
    """Return the least `most` divisors of n, in time independent of n's size (trial division to a bound)."""
    found = [d for d in range(1, min(n, 10_000) + 1) if n % d == 0]
    return found[:most]


def _check_heads(fields: dict[str, ast.Field], collector: Collector) -> None:
    heads, kv_heads = fields.get("heads"), fields.get("kv_heads")
    if heads is None or kv_heads is None or heads.value is None or kv_heads.value is None:
        return
    a, n_kv = int(heads.value.value), int(kv_heads.value.value)
    if a % n_kv:
        divisors = small_divisors(a, 12)
        collector.error(kv_heads.value.span, "heads-not-divisible",
                        f"heads {a} is not a multiple of kv_heads {n_kv}",
                        hint="kv_heads must divide heads: one of "
                             + ", ".join(map(str, divisors)),
                        notes=(Note(heads.value.span, "heads is stated here"),))


def _check_positions(fields: dict[str, ast.Field], collector: Collector) -> None:
    """Report a learned position table without its length: it would price and build zero rows."""
    learned = fields.get("learned_positions")
    if learned is None or learned.value is None or learned.value.value is not True or "max_positions" in fields:
        return
    collector.error(learned.value.span, "missing-field",
                    "learned_positions needs the table's length, but the model states no max_positions",
                    hint="state the positions: `max_positions 1024` (HF n_positions)")


# --------------------------------------------------------------------------
# The layer stack
# --------------------------------------------------------------------------


def _check_stack(model: ast.Model, profile: ast.Profile | None, blocks: set[str],
                 collector: Collector) -> None:
    """Report stack problems, unknown kinds and flavours whose dimensions are missing."""
    stack = next((item for item in model.items if isinstance(item, ast.Stack)), None)
    if profile is None:
        if stack is not None:
            for problem in model_stack(model, (), None).problems:
                if problem.code in _STRUCTURAL:
                    _emit(problem, collector)
        return
    kinds = profile_kinds(profile)
    if stack is not None:
        _check_stack_kinds(stack, profile, kinds, collector)
    result = model_stack(model, kinds, profile_default(profile))
    for problem in result.problems:
        _emit(problem, collector)
    used = dict.fromkeys(group.kind for group in result.groups)
    _check_flavours(model, profile, [k for k in used if k in kinds], blocks, collector)


def _emit(problem: StackProblem, collector: Collector) -> None:
    """Report a stack problem (model_stack has located it) as a diagnostic."""
    report = collector.warning if problem.severity == "warning" else collector.error
    report(problem.where or NO_SPAN, problem.code, problem.message, hint=problem.hint)


def _check_stack_kinds(stack: ast.Stack, profile: ast.Profile, kinds: dict[str, ast.Kind],
                       collector: Collector) -> None:
    for name in stack_kind_names(stack.body):
        if name.value not in kinds:
            collector.error(name.span, "unknown-kind",
                            f"the stack names kind '{name.value}', but profile "
                            f"'{profile.name.value}' has {_quoted(kinds) or 'no kinds'}",
                            hint=did_you_mean(name.value, kinds))


def _check_flavours(model: ast.Model, profile: ast.Profile, used: list[str], blocks: set[str],
                    collector: Collector) -> None:
    """Report kinds in the stack whose flavour needs a block the model does not declare."""
    kinds = profile_kinds(profile)
    stated = {item.name.value for item in model.items if isinstance(item, ast.Field)}
    dense = [k for k in used if _runs_dense(kinds[k], kinds, blocks)]
    if dense and "ffn_width" not in stated:
        collector.error(_kind_site(model, dense[0]), "missing-field",
                        f"layers of kind '{dense[0]}' run a dense feed-forward, but the model "
                        "states no ffn_width", hint="state the dense width: `ffn_width 11008` "
                        "(HF intermediate_size)")
    for kind in used:
        attention, ffn = kind_flavours(kinds[kind], kinds)
        if ffn == "moe" and "moe" not in blocks:
            collector.error(_kind_site(model, kind), "missing-moe-dims",
                            f"the stack has MoE layers (kind '{kind}' of profile "
                            f"'{profile.name.value}'), but the model declares no moe block",
                            hint="declare `moe { experts E  top_k K  expert_width W }`")
        if attention == "sliding" and "sliding_window" not in stated:
            collector.error(_kind_site(model, kind), "missing-field",
                            f"the stack has sliding-window layers (kind '{kind}' of profile "
                            f"'{profile.name.value}'), but the model states no sliding_window",
                            hint="state the window: `sliding_window 4096` (HF sliding_window)")
        if attention == "ssm" and "ssm" not in blocks:
            collector.error(_kind_site(model, kind), "missing-field",
                            f"the stack has state-space layers (kind '{kind}' of profile "
                            f"'{profile.name.value}'), but the model declares no ssm block",
                            hint="declare `ssm { ssm_state  ssm_conv  ssm_expand  ssm_dt_rank }`")
        if attention == "linear" and "linear" not in blocks:
            collector.error(_kind_site(model, kind), "missing-linear-dims",
                            f"the stack has linear-attention layers (kind '{kind}' of profile "
                            f"'{profile.name.value}'), but the model declares no linear block",
                            hint="declare `linear { key_heads  key_head_dim  value_heads  "
                                 "value_head_dim  conv }`")


def _runs_dense(kind: ast.Kind, kinds: dict[str, ast.Kind], blocks: set[str]) -> bool:
    """Whether a layer of `kind` runs a dense feed-forward (its flavour, else the model's own)."""
    ffn = kind_flavours(kind, kinds)[1]
    return ffn == "dense" or (ffn is None and "moe" not in blocks)


def _kind_site(model: ast.Model, kind: str) -> Span:
    """Return where the model asks for `kind`: its first mention, else the profile it names."""
    for item in model.items:
        names: Iterable[ast.Name] = ()
        if isinstance(item, ast.Stack):
            names = stack_kind_names(item.body)
        elif isinstance(item, ast.LayerTypes):
            names = item.names
        for name in names:
            if name.value == kind:
                return name.span
    return model.profile.span if model.profile else model.name.span
