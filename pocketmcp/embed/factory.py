"""Which embedder the settings ask for, and making it: the one place the runtime comes to.

Knowing the identity comes first (it is checked against the index before anything loads):
`wanted` works it out from the settings alone, `settled` completes it from what the index
records, and `resolve` also asks the provider for a dimension no one knows. `make` then builds the
embedder: the built-in model (blocking: it loads), or a remote provider's client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import msgspec

from pocketmcp import __version__, logs
from pocketmcp.core.identity import LOCAL, Identity
from pocketmcp.embed.base import Batching, Embedder
from pocketmcp.embed.local import LocalEmbedder, local_identity
from pocketmcp.embed.models import ModelSpec, bundled_tokenizer
from pocketmcp.embed.prefixes import family, known_dimensions
from pocketmcp.embed.settings import EmbedSettings
from pocketmcp.errors import ProviderError

# The remote providers' modules (httpx and its own imports: a few tens of milliseconds) are
# imported by _remote only: a server on the built-in model never needs them, and its first
# search waits for every import on the way.
if TYPE_CHECKING:
    from pocketmcp.embed.remote import RemoteEmbedder

log = logs.get("pocketmcp.embed")

BASE_URLS = {"openai": "https://api.openai.com/v1", "ollama": "http://localhost:11434"}
MODELS = {"openai": "text-embedding-3-small", "ollama": "nomic-embed-text"}
WINDOW_USED = 0.9  # of a remote model's window: its tokenizer is not the one counting
AZURE_HOSTS = (".openai.azure.com", ".services.ai.azure.com", ".cognitiveservices.azure.com")


@dataclass(frozen=True)
class Wanted:
    """The identity the settings ask for (dim 0: not known yet), and how it came about."""

    identity: Identity
    prefixes_given: bool  # EMBED_DOC_PREFIX or EMBED_QUERY_PREFIX was set
    spec: ModelSpec | None = None  # the local model's


def wanted(settings: EmbedSettings) -> Wanted:
    """From the settings alone (blocking for the local provider: it looks its model up)."""
    given = settings.doc_prefix is not None or settings.query_prefix is not None
    if settings.provider == LOCAL:
        spec = ModelSpec(settings)
        return Wanted(local_identity(spec, settings.doc_prefix, settings.query_prefix),
                      given, spec)
    model = settings.model or MODELS[settings.provider]
    known = family(model)
    input_type = settings.provider == "openai" and (
        settings.input_type == "on" or (settings.input_type == "auto" and known.input_type))
    doc = known.doc_prefix if settings.doc_prefix is None else settings.doc_prefix
    query = known.query_prefix if settings.query_prefix is None else settings.query_prefix
    dim = settings.dimensions or known_dimensions(model) or 0
    return Wanted(Identity(provider=settings.provider, model=model, dim=dim,
                           doc_prefix=doc, query_prefix=query, input_type=input_type), given)


def settled(want: Wanted, stored: Identity | None) -> Identity:
    """The identity to use with an index that records `stored` (None: a new index).

    The same provider and model take the index's dimension when the settings leave it open.
    An index made before prefixes were recorded keeps none, unless prefixes are set: its
    vectors were made without them. Anything else that differs is for the writer to refuse.
    """
    identity = want.identity
    if stored is None or (stored.provider, stored.model) != (identity.provider, identity.model):
        return identity
    if not identity.dim:
        identity = msgspec.structs.replace(identity, dim=stored.dim)
    legacy = stored.provider == LOCAL and not stored.doc_prefix and not stored.query_prefix
    if legacy and not want.prefixes_given and (identity.doc_prefix or identity.query_prefix):
        log.info("prefixes_kept", model=identity.model,
                 reason="the index was built without prefixes; `pocketmcp index --rebuild` "
                        "adds the model's recommended ones")
        identity = msgspec.structs.replace(identity, doc_prefix="", query_prefix="")
    return identity


async def resolve(settings: EmbedSettings, want: Wanted, stored: Identity | None
                  ) -> Identity:
    """`settled`, and the dimension asked of the provider when no one knows it."""
    identity = settled(want, stored)
    if identity.dim:
        return identity
    embedder = _remote(settings, identity)
    try:
        dim = await embedder.probe()
    except ProviderError as exc:
        raise type(exc)(f"{exc}; the dimension of {identity.model!r} is not known before "
                        "the provider answers once: set EMBED_DIMENSIONS to start without "
                        "it") from exc
    finally:
        await embedder.aclose()
    log.info("dimensions_probed", model=identity.model, dimensions=dim)
    return msgspec.structs.replace(identity, dim=dim)


def make(settings: EmbedSettings, want: Wanted, identity: Identity) -> Embedder:
    """The embedder for `identity` (blocking: the local model loads here)."""
    if identity.provider == LOCAL:
        assert want.spec is not None
        return LocalEmbedder(want.spec, identity, Batching(size=settings.batch_size,
                                                           tokens=settings.batch_tokens),
                             idle_unload_s=settings.idle_unload_s,
                             index_threads=settings.index_threads)
    return _remote(settings, identity)


class Embedding:
    """The settings' embedder as the runtime makes it (an `EmbedderSource`)."""

    def __init__(self, settings: EmbedSettings) -> None:
        self._settings = settings
        self._want: Wanted | None = None

    async def identity(self, stored: Identity | None) -> Identity:
        want = self._want = await anyio.to_thread.run_sync(wanted, self._settings)
        return await resolve(self._settings, want, stored)

    def make(self, identity: Identity) -> Embedder:
        want = self._want or wanted(self._settings)
        return make(self._settings, want, identity)


def _remote(settings: EmbedSettings, identity: Identity) -> RemoteEmbedder:
    # heavy (httpx): only for a remote provider, see the note at the imports
    from pocketmcp.embed.http import Api, Remote
    from pocketmcp.embed.ollama import OllamaApi
    from pocketmcp.embed.openai import OpenAIApi
    from pocketmcp.embed.remote import RemoteEmbedder

    base_url = settings.base_url or BASE_URLS[identity.provider]
    host = (urlsplit(base_url).hostname or "").lower()
    azure = host.endswith(AZURE_HOSTS)
    api: Api = (OpenAIApi(identity.model, dimensions=settings.dimensions,
                          input_type=identity.input_type,
                          base64=azure or host == "api.openai.com")
                if identity.provider == "openai"
                else OllamaApi(identity.model, dimensions=settings.dimensions))
    key = settings.api_key.reveal() if settings.api_key else None
    headers = {"User-Agent": f"pocketmcp/{__version__}"}
    if key:
        headers["api-key" if azure else "Authorization"] = key if azure else f"Bearer {key}"
    tokenizer = bundled_tokenizer()
    window = settings.max_tokens or family(identity.model).window
    prefix = identity.doc_prefix
    prefix_tokens = len(tokenizer.encode(prefix).ids) - 2 if prefix else 0
    remote = Remote(provider=identity.provider, model=identity.model, base_url=base_url,
                    timeout_s=settings.timeout_s,
                    retries=settings.retries, retry_base_s=settings.retry_base_s,
                    concurrency=settings.concurrency, batch_size=settings.batch_size,
                    batch_tokens=settings.batch_tokens, headers=headers,
                    key_variable=settings.api_key_env, secret=settings.api_key)
    return RemoteEmbedder(api, identity, remote, tokenizer=tokenizer,
                          max_tokens=max(32, int(window * WINDOW_USED) - prefix_tokens))
