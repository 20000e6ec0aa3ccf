"""The no-op task ``bench.tasks_path`` times (a module of its own, so the
worker imports it by path like any task)."""
from django.tasks import task


@task
def noop(guess: str, round_id: str) -> None:
    return None
