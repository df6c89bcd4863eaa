"""Hosting an engine in a worker: the worker that answers batches (:mod:`.worker`), the watch on the engine's own
processes (:mod:`.watchdog`), the engines a worker opens by backend (:mod:`.engines`)."""
