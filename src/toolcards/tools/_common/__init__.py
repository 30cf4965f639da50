"""Helpers shared by several cards (not a card; no card-specific code)."""
