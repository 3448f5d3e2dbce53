"""The operator's console at ``/ui``: server-rendered pages and a little JavaScript of
our own, live through the event stream, over the documented admin API.

The console is a client of the API, in process: every fact it shows and every action
it takes is an admin API request made with the signed-in person's own token
(``inprocess.py``), so it sees and may do exactly what that token may, roles and
tenants included. Its sign-in keeps that token server-side behind an ``HttpOnly``,
``SameSite=Strict`` cookie scoped to ``/ui`` (``sessions.py``): the cookie is never a
credential for ``/v1/*``. ``app.py`` is the ASGI app ``server/`` mounts.
"""
