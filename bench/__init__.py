"""trainprof's benchmark harness (``make bench``): overhead on a synthetic training loop and
the cost of long runs. Plain Python; it measures and prints, it asserts nothing."""
