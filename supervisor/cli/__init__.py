"""`mcp-supervisor`: the command line (`main.py`), its client commands over the admin API,
`auth login`, and the conformance suite's client. Nothing is imported here, so a client
command loads only what it uses."""
