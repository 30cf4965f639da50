"""PostgreSQL implementations of the stores (extra ``postgres``: psycopg 3)."""
