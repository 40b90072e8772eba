"""What the tests share, apart from fixtures (which stay in the conftest files).

tests/ is on sys.path (pytest's rootdir import mode inserts the folder of the top conftest.py,
which has no __init__.py), so tests import `support.<module>`; scripts/ and bench/ put tests/
on sys.path themselves.

- runtime: settings for a test's index (`make_config`, `remote_config`), `running` a runtime
- tools: the tools called through the SDK's in-memory client (`Tools`, `refused`)
- index: an index driven by the pipeline directly (`Index`, `Watching`)
- fake_embedder: the deterministic embedder for tests of logic
- cli: the command line run in a subprocess
- mcp_harness: the real server as a subprocess (stdio, HTTP) with the SDK's client
- provider_server: an embedding provider on 127.0.0.1 with faults on demand
- pg_server: a PostgreSQL server for the session
- docs, badinput, vault: documents, bad inputs and a notes vault written for tests
- chaos, load, protocol_fuzz: kills, load and fuzzing for the reliability tests
- web: the server the browser tests drive
"""
