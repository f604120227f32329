"""The File node: one parsed .hpf file, and the top-level declarations it holds."""

from __future__ import annotations

from typing import Union

import attrs

from hpdsl.ast.devices import Cluster, Device
from hpdsl.ast.families import Family
from hpdsl.ast.fields import FieldDecl
from hpdsl.ast.leaves import Comment, _span
from hpdsl.ast.models import Model
from hpdsl.ast.profiles import Profile
from hpdsl.ast.vocabulary import ImportDecl, SlotsBlock, Vocabulary
from hpdsl.diagnostics.span import Span


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------


Declaration = Union[ImportDecl, Vocabulary, SlotsBlock, Profile, Family, Model, Device, Cluster, FieldDecl]


@attrs.frozen
class File:
    """One parsed .hpf file: its declarations in order and its comments."""

    path: str = attrs.field(eq=False)
    items: tuple[Declaration, ...]
    comments: tuple[Comment, ...] = ()
    span: Span = _span()
