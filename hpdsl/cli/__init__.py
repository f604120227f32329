"""Command lines into pipeline calls, and their outcomes into text, JSON and exit codes.

Every command is one function under the `main` group (hpdsl/cli/app.py), which
maps errors to exit codes in one place: spec diagnostics exit 1, usage and I/O
errors 2, anything else is a bug in hpdsl and exits 3 with a one-line report
(the traceback only with HPDSL_DEBUG=1). Commands live by concern: build.py
(compile, fmt), models.py (stack, import-hf), cost.py (estimate, search; its
tables and plot in report.py), torch.py (explain). The group imports a
command's module only when it runs, and commands import the pipeline in their
bodies, so `hpdsl --help` and `hpdsl compile` load neither numpy nor rich.
"""

from hpdsl.cli.app import (EXIT_INTERNAL, EXIT_OK, EXIT_SPEC, EXIT_USAGE, emit_json, exit_code,
                           json_option, main, plural, report_diagnostics)

__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_SPEC", "EXIT_USAGE", "emit_json", "exit_code",
           "json_option", "main", "plural", "report_diagnostics"]
