"""`hpdsl lsp`: the language server, for editors (pygls is imported only here, when it runs)."""

from __future__ import annotations

import click

from hpdsl.errors import InputError


@click.command("lsp")
@click.option("--stdio", is_flag=True, help="Talk over stdin and stdout (the default and only transport).")
def lsp_command(stdio: bool) -> None:
    """Run the .hpf language server over stdio: diagnostics, hover, definitions, completion.

    Editors start it themselves; see editors/ for VS Code and docs/editors.md for Neovim.

    \b
    Examples:
      hpdsl lsp                 # what an editor's LSP client runs
      hpdsl lsp --stdio         # the same, for clients that pass --stdio
    """
    try:
        from hpdsl.lsp.server import serve
    except ImportError as error:
        raise InputError(f"hpdsl lsp needs pygls: pip install 'hpdsl[lsp]' ({error})") from None
    serve()
