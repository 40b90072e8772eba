"""The stdio harness under its former name, for modules that still import it from here
(it lives in support/mcp_harness.py)."""

from support.mcp_harness import mcp_session, server_env

__all__ = ["mcp_session", "server_env"]
