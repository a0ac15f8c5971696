"""`python -m trainprof` is the same as the `trainprof` command."""

from trainprof.console_script import main

main()
