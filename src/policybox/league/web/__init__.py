"""``policybox ladder serve``: the ladder's web page and its JSON API, a face on its database.

It reads what ``ladder run`` writes (and stores what a team submits, as ``ladder submit`` does,
once an upload's policy is built in a cell: the only cell it starts); it plays nothing. Every page
is one of ``policybox.league.views``' views, served twice: as JSON under ``/api/`` and as HTML
rendered from the same model (``pages``). ``app.make_app(DIR)`` is the ASGI app. This package's own
import is light, and so is its ``server_settings`` (``ServeSettings``: ``ladder serve``'s options), which
reads the upload cap here: the command line reads both without loading Starlette or the database.
"""

MiB = 1024 * 1024
UPLOAD_CAP = 256 * MiB  # a request body to /submit or /api/submit: the zip and the form around it
