"""`hpdsl lsp`: a Language Server for .hpf files over stdio, on pygls and lsprotocol.

One module per feature: analysis.py (a document, its imports and the standard
library checked and indexed), diagnostics.py, hover.py, definition.py,
completion.py, symbols.py, formatting.py; server.py wires them into pygls.
Nothing here is imported by `hpdsl --help`: the `lsp` command imports
server.py, which imports pygls, only when it runs.
"""
