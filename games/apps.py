from django.apps import AppConfig


class GamesConfig(AppConfig):
    name = "games"
    verbose_name = "Codemojex"

    def ready(self):
        # The queue dashboard links jobs to guesses, rounds and players
        # through these resolvers (echomq itself knows nothing of games).
        from . import players  # noqa: F401  connects the user/player cache invalidation signals
        from . import schedules  # noqa: F401  connects the round schedules' mirror signals
        from .admin_jobs import register_all

        register_all()
