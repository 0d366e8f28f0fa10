"""`python -m benchlab` is the `benchlab` command."""

from benchlab.cli import main

main()
