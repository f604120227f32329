"""The sizes a parse accepts: shared by the fast parser's front door and Lark's path."""

# Bounds that keep every later stage's work and output proportional to a sane file
# (docs/trust.md#hostile-input): the largest file and line parsed.
MAX_FILE_CHARS = 1 << 18
MAX_LINE_CHARS = 100_000
