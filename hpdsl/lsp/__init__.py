"""`hpdsl lsp`: a Language Server for .hpf files over stdio (JSON-RPC, no third-party protocol library).

transport.py frames messages; server.py orders them, debounces checks and
answers every request; workspace.py holds open buffers, import closures and
what was published; positions.py converts columns to and from the negotiated
encoding; features.py turns requests into calls of one module per feature:
analysis.py (a document, its imports and the standard library checked and
indexed), diagnostics.py, hover.py, definition.py, completion.py, symbols.py,
formatting.py, rename.py (rename and references), actions.py (quick fixes).
Nothing here is imported by `hpdsl --help`: the `lsp` command imports
server.py only when it runs (docs/language-server.md).
"""
