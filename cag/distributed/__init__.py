"""Ray for ingest (and, in `eval.ray_eval`, for eval): one driver, actors that each hold one model.

Imported only when `--ray` is given: Ray is slow to import and is an optional extra (`cag[ray]`).

    options.py   RayOptions: where the cluster is, workers per model, CPUs per worker (no Ray import)
    cluster.py   connect to (or start) a cluster, size the workers, the environment they run in
    dispatch.py  a work queue over pools of actors: bounded in flight, re-assigned when an actor dies
    prefill.py   the prefill actor: one model, writes chunk caches straight into the store folder
    ingest.py    the driver: diffs the catalog, assigns chunks, commits the catalog and the index
"""
