"""Spans, diagnostic codes, the collector and rendering."""

from hpdsl.diagnostics.codes import CODES
from hpdsl.diagnostics.diagnostic import Collector, Diagnostic, Note
from hpdsl.diagnostics.render import render_diagnostic, render_diagnostics
from hpdsl.diagnostics.span import NO_SPAN, Source, Span

__all__ = ["CODES", "Collector", "Diagnostic", "NO_SPAN", "Note", "Source", "Span",
           "render_diagnostic", "render_diagnostics"]
