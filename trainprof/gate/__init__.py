"""`trainprof ci`'s gates and their outputs: the verdict (gates.py: outcome.py, thresholds.py,
baseline.py), the console table (render.py), JUnit XML (junit.py), GitHub Actions annotations
and the step summary (github.py)."""
