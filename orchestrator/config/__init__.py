"""config: TODO map."""
