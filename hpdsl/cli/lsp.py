"""`hpdsl lsp`: the language server, for editors (its modules are imported only here, when it runs)."""

from __future__ import annotations

import sys

import click


@click.command("lsp")
@click.option("--stdio", is_flag=True, help="Talk over stdin and stdout (the default and only transport).")
def lsp_command(stdio: bool) -> None:
    """Run the .hpf language server over stdio: diagnostics, hover, definitions, completion, quick fixes.

    Editors start it themselves; see editors/ for VS Code and Neovim, and
    docs/language-server.md for what it offers. Its log is stderr.

    \b
    Examples:
      hpdsl lsp                 # what an editor's LSP client runs
      hpdsl lsp --stdio         # the same, for clients that pass --stdio
    """
    from hpdsl.lsp.server import serve

    sys.exit(serve())
