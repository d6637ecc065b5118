"""The session viewer: a read-only web UI over a store, served by ``tractkv serve`` (beside the sync API)
and ``tractkv view`` (alone, on 127.0.0.1). Needs the ``server`` extra.

Modules, bottom up: :mod:`~tractkv.view.html` (an escaping HTML builder), :mod:`~tractkv.view.inspector` (what
the pages show, read from a store), :mod:`~tractkv.view.pages` (rendering), :mod:`~tractkv.view.app`
(routes, sign-in, live updates).
"""
