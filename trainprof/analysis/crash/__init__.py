"""Why a training job crashed or hung: its output read against the crash signatures (rules/),
the hang watch's record, and torchrun's report of a failed rank."""
