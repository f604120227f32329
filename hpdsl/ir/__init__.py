"""The IR: frozen nodes, lowering from the AST, the one cattrs converter."""
