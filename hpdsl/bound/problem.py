"""One reason a bound model cannot be built as it is priced: what hpdsl/bound/shape.py and outer.py report."""

from __future__ import annotations

import attrs


@attrs.frozen
class LayerProblem:
    """One reason the backend cannot build a bound model as it is priced.

    `code` is the diagnostic code the checker reports it under. What it is about
    locates it: `kind`, the kind whose layers have it (None: the model as a
    whole); `field`, the model statement involved (a field of
    hpdsl/model/fields.py, a block name, or "stack" for the model's layer stack);
    `op`, the op count of the kind involved (hpdsl/model/ops.py).
    """

    code: str
    message: str
    hint: str
    kind: str | None = None
    field: str | None = None
    op: str | None = None


__all__ = ["LayerProblem"]
