from django.apps import AppConfig


class GamesConfig(AppConfig):
    name = "games"
    verbose_name = "Codemojex"

    def ready(self):
        from . import players  # noqa: F401  connects the user/player cache invalidation signals
