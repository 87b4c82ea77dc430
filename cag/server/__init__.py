"""`cag serve`: models kept warm behind an HTTP API (FastAPI + uvicorn).

    config.py       ServeConfig (frozen), checked once
    pool.py         loaded models, one queue (worker thread) each, least recently used unloaded
    gate.py         the main store's read/write gate (the server's own ingests vs questions)
    service.py      the work without HTTP: ask, ingest, sessions' turns
    sessions.py     a conversation's history as chunk caches in its own cag store
    turns.py        one turn: the history read through the context modes (native / translated / direct)
    paths.py        what ingest may read (configured roots) and write (the store's uploads/)
    routes.py, session_routes.py, openai_compat.py, streaming.py, schemas.py   the HTTP surface
    middleware.py, errors.py, metrics.py   API key, body limit, one-line JSON errors, Prometheus
    app.py, run.py  the FastAPI app; binding, warm-up and uvicorn
"""
