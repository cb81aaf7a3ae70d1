"""executors: TODO map."""
