"""The actors behind trio-mcp-supervisor: protocol core, connections, transports, router.

This package never imports ``supervisor``: the service is built around the actors, not
the other way round.
"""
