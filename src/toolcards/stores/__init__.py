"""Storage floor: the store protocols, their SQLite, PostgreSQL and memory implementations.

Imports only ``toolcards.core``. Every row belongs to a team.
"""
