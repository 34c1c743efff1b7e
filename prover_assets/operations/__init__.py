"""How a round is run, apart from what it computes: the estimate of its time (`eta`) and the
record of each attempt of a step, which decides whether a retry is worth it (`retries`).
Domain modules: no Dagster here; `assets/eta.py` and `assets/retries.py` call them."""
