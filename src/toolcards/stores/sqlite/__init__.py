"""SQLite implementations of the stores."""
