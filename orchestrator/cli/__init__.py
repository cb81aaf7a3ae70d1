"""cli: TODO map."""
