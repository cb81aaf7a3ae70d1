"""report: TODO map."""
