"""The Postgres + pgvector store (STORE=postgres): the same rows and answers as the SQLite
store, for indexes that several processes on several machines read and write at once.

Only the modules of this package import psycopg (installed with `pocketmcp[postgres]`).
`place.py` does not: it names an index without connecting to it.
"""
