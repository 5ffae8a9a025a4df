"""``fsm serve``: a live web view of the machines and instances of one workspace.

* :mod:`fsm.serve.views` reads what the pages show (``fsm ls``, ``status``, ``history``,
  diagrams with the run overlay) on each request, keeping nothing but the machines;
* :mod:`fsm.serve.api` is the JSON API under ``/api/`` (OpenAPI at ``/api/openapi.json``), the
  command line's meanings kept as HTTP statuses;
* :mod:`fsm.serve.watch` follows the instance folders with a file watcher and
  :mod:`fsm.serve.events` tells open pages what changed (server-sent events);
* :mod:`fsm.serve.access` keeps it safe: loopback only unless asked, a token for changes, the
  same origin, the right Host;
* :mod:`fsm.serve.app` puts them together with the pages (plain HTML, CSS and JavaScript in
  ``static/``, served from the package), and :mod:`fsm.serve.server` runs it under uvicorn.
"""

from __future__ import annotations

from fsm.serve.access import Access
from fsm.serve.app import create_app
from fsm.serve.server import ServeOptions, run
from fsm.serve.views import Served

__all__ = ["Access", "ServeOptions", "Served", "create_app", "run"]
