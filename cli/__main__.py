"""`python -m cli` runs the `lineups` command line."""

from cli.main import main

main()
