"""governance."""
