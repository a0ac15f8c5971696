"""`trainprof tune`: measures the settings trainprof can change without editing the job's code.

``candidates.py`` chooses what to try, ``measure.py`` runs the job once with one candidate,
``search.py`` alternates candidates with the job's own settings until each is told apart or the
budget ends, and ``render.py`` shows the table and the best combination.
"""
