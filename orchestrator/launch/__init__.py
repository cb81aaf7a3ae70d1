"""launch: TODO map."""
