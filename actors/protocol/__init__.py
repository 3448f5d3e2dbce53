"""Sans-I/O MCP core: JSON-RPC 2.0 messages, newline framing, the client session.

Nothing in this package imports Trio or does I/O; transports feed it bytes and send
the bytes it produces. A test enforces that.
"""
