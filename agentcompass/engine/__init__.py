"""The engine: supervisor, request actors, scheduler, environment pool and task actors."""
