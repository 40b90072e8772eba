"""PocketMCP: local semantic search over a folder of documents, served over MCP."""

__version__ = "0.1.0"

__all__ = ["__version__"]
