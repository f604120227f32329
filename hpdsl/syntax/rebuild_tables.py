"""`python -m hpdsl.syntax.rebuild_tables`: rewrite grammar/hpdsl.tables.json after a grammar change.

It sits above both the tables' loader (tables.py) and the parser's options
(parser.py), so neither imports the other.
"""

from __future__ import annotations

import sys

from lark import Lark

from hpdsl.files import write_text_atomic
from hpdsl.syntax.parser import KEYWORD_SALT, parser_options
from hpdsl.syntax.tables import grammar_text, tables_json, tables_key, tables_path


def main() -> None:
    """Rebuild grammar/hpdsl.tables.json from the grammar (run from a source checkout)."""
    grammar, options = grammar_text(), parser_options()
    path = tables_path()
    text = tables_json(Lark(grammar, **options), tables_key(grammar, options, KEYWORD_SALT))
    write_text_atomic(path, text)
    print(f"wrote {path} ({len(text):,} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
