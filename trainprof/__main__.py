"""`python -m trainprof` is the same as the `trainprof` command."""

from trainprof.cli import main

main()
