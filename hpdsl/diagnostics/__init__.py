"""Spans, diagnostic codes, the collector, rendering and name suggestions."""

from hpdsl.diagnostics.codes import CODES
from hpdsl.diagnostics.diagnostic import Collector, Diagnostic, Note
from hpdsl.diagnostics.render import headline, render_diagnostic, render_diagnostics
from hpdsl.diagnostics.span import NO_SPAN, Source, Span
from hpdsl.diagnostics.suggest import did_you_mean

__all__ = ["CODES", "Collector", "Diagnostic", "NO_SPAN", "Note", "Source", "Span",
           "did_you_mean", "headline", "render_diagnostic", "render_diagnostics"]
