"""The WebSocket bridge's hub (``/v1/bridge`` on the ``serve`` bind).

Each client session gets a process of its own of a server configured with
``bridge: true``, and its JSON-RPC lines pass through untouched: ``gate.py`` decides
who may connect, ``hub.py`` keeps the sessions, the bounds and what operators see,
``link.py`` runs one socket, ``session.py`` one bridged process.
"""
