"""bridges."""
