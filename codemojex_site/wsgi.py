"""WSGI entry point (gunicorn codemojex_site.wsgi).

Once the application is set up, what start-up made (Django, the settings,
the apps, their models: ~100,000 objects the collector tracks) lives as long
as the process, so it is moved out of the collector's way (``gc.freeze``,
after one collection so no start-up garbage is kept for ever). The young
generations still collect what requests leave, as before; a full collection
then walks only what was made since start-up, where it walked everything
(~60 ms of a worker's CPU each, every few thousand requests).
"""
import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codemojex_site.settings")
application = get_wsgi_application()
gc.collect()
gc.freeze()
