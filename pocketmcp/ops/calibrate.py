"""Each embedding model's background cosine, for the ops that score matches (learnt once
per process in embed/background.py, where the runtime's start reaches it too)."""

from __future__ import annotations

from pocketmcp.embed.background import model_background

__all__ = ["model_background"]
