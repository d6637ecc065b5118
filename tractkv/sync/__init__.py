"""Sync: move objects and refs between stores (path, HTTP hub, S3, bundle file).

Layers, each importing only downward::

    frames      the object stream format (length-prefixed frames, coalesced writes, streaming limits)
    remote      the Remote interface every transport implements, RefUpdate / RefResult, limits
    receive     the receiving side shared by every transport: verify, store in batches, CAS ref updates
    negotiate   what to send: closure walks pruned at what the other side is known to have
    path/bundle/http_client/s3   transports (a Remote each)
    server      the HTTP hub (Starlette on uvicorn/h11; the `server` extra)
    remotes     named remotes (local config), URL kinds, opening a Remote
    transfer    fetch / push / clone on a store, and merging a tracking branch into a session's branch

See docs/ARCHITECTURE.md, "A push", and docs/decisions.md, "Sync".
"""
