"""Several ``serve`` processes as one service: replicas sharing a PostgreSQL store.

``keys.py``: the shared keys that authenticate what one replica mints and another
checks (session ids, request states, forwarded requests), with rotation.
"""
