"""Python's cyclic garbage collector while the server starts (a leaf: cli.py turns it off,
mcp/serve.py and mcp/host.py turn it back on).

The imports of start-up (the MCP SDK's protocol types, pydantic, numpy, onnxruntime) make
hundreds of thousands of objects, and the collections they trigger free next to nothing
while taking about a tenth of the time to the first answer.
"""

from __future__ import annotations

import gc


def collect_again() -> None:
    """Turn the garbage collector back on (if start-up turned it off). What start-up made is
    frozen first: it lives as long as the process, and later collections skip it."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
