"""Command lines into pipeline calls, and their outcomes into text, JSON and exit codes.

Every command is one function under the `main` group (hpdsl/cli/app.py), which
maps errors to exit codes in one place: spec diagnostics exit 1, usage and I/O
errors 2, anything else is a bug in hpdsl and exits 3 with a one-line report
(the traceback only with HPDSL_DEBUG=1). Commands live by concern: build.py
(compile, fmt), models.py (stack, import-hf, estimate, search), torch.py
(explain). They import the pipeline when they run, so `hpdsl --help` stays fast.
"""

from hpdsl.cli import build, cost, models, torch  # noqa: F401  (registers the commands)
from hpdsl.cli.app import (EXIT_INTERNAL, EXIT_OK, EXIT_SPEC, EXIT_USAGE, emit_json, exit_code,
                           json_option, main, plural, report_diagnostics)

__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_SPEC", "EXIT_USAGE", "emit_json", "exit_code",
           "json_option", "main", "plural", "report_diagnostics"]
