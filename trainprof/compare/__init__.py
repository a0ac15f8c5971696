"""Two runs side by side: the settings each ran with, throughput windows with their spread,
and the verdict (faster, slower, within noise). ``trainprof compare`` and ``trainprof ci``'s
baseline gate both read from here."""
