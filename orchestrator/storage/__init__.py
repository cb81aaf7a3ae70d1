"""storage: TODO map."""
