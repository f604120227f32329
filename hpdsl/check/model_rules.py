"""The cross-field rules of a model: fields that are sound alone but contradict one another.

Each rule reads the fields hpdsl/check/model_fields.py found sound (by name), so a
wrong type is reported once, there, and never again here.
"""

from __future__ import annotations

from hpdsl import ast
from hpdsl.diagnostics import Collector, Note
from hpdsl.model.routing import routing_problem


def check_moe_rules(moe: dict[str, ast.Field], collector: Collector) -> None:
    """Report a moe block whose top_k or shared-expert fields contradict its counts."""
    _check_top_k(moe, collector)
    _check_shared(moe, collector)


def _check_top_k(moe: dict[str, ast.Field], collector: Collector) -> None:
    """Report top_k or routing groups that leave a token fewer experts than it chooses (hpdsl/model/routing.py)."""
    values = {name: _int(moe.get(name)) for name in ("experts", "top_k", "router_groups", "router_group_top")}
    if values["experts"] is None or values["top_k"] is None:
        return  # unstated, or a wrong type the field check reports
    problem = routing_problem(values["experts"], values["top_k"], values["router_groups"] or 1,
                              values["router_group_top"] or 1)
    blamed = moe.get(problem.field) if problem is not None else None
    if problem is not None and blamed is not None and blamed.value is not None:
        collector.error(blamed.value.span, problem.code, problem.message, hint=problem.hint)


def _int(field: ast.Field | None) -> int | None:
    """Return a field's whole-number value (None: unstated, or not a whole number)."""
    value = None if field is None or field.value is None else field.value.value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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


def small_divisors(n: int, most: int) -> list[int]:
    """Return the least `most` divisors of n, in time independent of n's size (trial division to a bound)."""
    found = [d for d in range(1, min(n, 10_000) + 1) if n % d == 0]
    return found[:most]


def check_heads(fields: dict[str, ast.Field], collector: Collector) -> None:
    """Report kv_heads that do not divide heads, with the divisors that would."""
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


def check_positions(fields: dict[str, ast.Field], collector: Collector) -> None:
    """Report a learned position table without its length: it would price and build zero rows."""
    learned = fields.get("learned_positions")
    if learned is None or learned.value is None or learned.value.value is not True or "max_positions" in fields:
        return
    collector.error(learned.value.span, "missing-field",
                    "learned_positions needs the table's length, but the model states no max_positions",
                    hint="state the positions: `max_positions 1024` (HF n_positions)")
