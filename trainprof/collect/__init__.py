"""Collecting a run: launching the job with the probe in it (``runner``) or attaching to one
(``attach``), sampling it from outside (``samplers``), and writing its run directory. Nothing
here analyses a run: that is ``trainprof.analysis``'s, from what this writes."""
