"""`trainprof ci`'s gates and their outputs: the verdicts (gates.py), the console table
(render.py), JUnit XML (junit.py), GitHub Actions annotations and the step summary (github.py)."""
