"""provision: TODO map."""
