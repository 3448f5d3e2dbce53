"""``serve``'s HTTP server: the apps composed, one mount table, Hypercorn and its drain."""

from supervisor.server.serving import BindError, Server, listen, serve

__all__ = ["BindError", "Server", "listen", "serve"]
