"""sweep: TODO map."""
