"""Sans-I/O MCP core: JSON-RPC 2.0 messages, their framings, the client session and
the server session.

Nothing in this package imports Trio or does I/O. The client session takes and gives
messages (``messages.py``); the server session (``server_session.py``: the gateway's
side) takes a client's decoded JSON objects and gives messages. The transports turn
bytes into messages and back with the framing codecs here (``ndjson.py`` for stdio,
``http_framing.py`` and ``sse.py`` for HTTP), once per frame. A test enforces that
the package stays pure.
"""
