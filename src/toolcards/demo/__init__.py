"""Runnable demonstrations of toolcards (``python -m toolcards.demo``)."""
