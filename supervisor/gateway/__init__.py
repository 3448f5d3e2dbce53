"""The MCP gateway: the supervised aggregate served as one MCP server.

Any MCP client (a desktop host, an IDE agent, a TypeScript runtime) reaches every
supervised server through one endpoint, with what the embedding API gives a host:
self-healing connections, a turn per listing, ``tool_search``, trust rules, argument
validation, bounded output and one audit row per call.

- ``core.py``: the MCP methods over one supervisor ``Session`` (either era on the
  front; backends of either era behind it, which the connection actors translate).
- ``results.py``: our envelope as an MCP result or a JSON-RPC error (pure).
- ``peer.py``: one handshake-era client over the protocol core's server session
  (``actors/protocol/server_session.py``), which holds every request id on either
  side and makes every error answer; ``outlet.py``: where one client request's
  related messages go (progress, the requests a backend asks the client).
- ``stateless.py``: the front for per-request-era (2026-07-28) clients, with
  ``tenants.py`` (a session per tenant, idle expiry), ``parked.py`` and
  ``request_state.py`` (input-required rounds) and ``listen.py``
  (``subscriptions/listen``).
- The fronts do the I/O: Streamable HTTP at ``/mcp`` on the admin app, and
  ``mcp-supervisor stdio``.
"""
