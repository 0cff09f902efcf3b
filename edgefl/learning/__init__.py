"""Learning workload: datasets, partitions, models, the shared local trainer, FLOP measurement."""
