"""text: TODO map."""
