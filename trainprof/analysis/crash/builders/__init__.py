"""One module per crash family: the patterns its row of the table uses and the builder that
turns the row's hits into a finding."""
