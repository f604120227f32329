"""`python -m hpdsl`: the same as the `hpdsl` command."""

from hpdsl.cli import main

main(prog_name="hpdsl")
