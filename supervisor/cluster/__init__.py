"""Several ``serve`` processes as one service: replicas sharing a PostgreSQL store.

``keys.py``: the shared keys that authenticate what one replica mints and another
checks (session ids, request states, forwarded requests), with rotation.
``replica.py``: who this process is (id, incarnation) and its events naming it.
``heartbeats.py``: its heartbeat row, readiness, and the rows of the others;
``digest.py``: the config digest replicas compare.
"""
