"""The queue pages; mount them under the admin, before ``admin.site.urls``:

    path("admin/queues/", include("echomq.contrib.django.urls")),

The overview answers the search box too (``?q=``), so no fixed path
shadows a queue's name.
"""
from django.urls import path

from . import views

app_name = "echomq"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("<str:queue>/", views.queue_detail, name="queue"),
    path("<str:queue>/pause/", views.pause, name="pause"),
    path("<str:queue>/resume/", views.resume, name="resume"),
    path("<str:queue>/find/", views.find_job, name="find"),
    path("<str:queue>/events/", views.events, name="events"),
    path("<str:queue>/dead/", views.dead_bulk, name="dead_bulk"),
    path("<str:queue>/lanes/<str:lane>/", views.lane_detail, name="lane"),
    path("<str:queue>/schedules/<str:name>/pause/", views.schedule_pause, name="schedule_pause"),
    path("<str:queue>/schedules/<str:name>/resume/", views.schedule_resume, name="schedule_resume"),
    path("<str:queue>/jobs/<str:job_id>/", views.job_detail, name="job"),
    path("<str:queue>/jobs/<str:job_id>/requeue/", views.requeue, name="requeue"),
    path("<str:queue>/jobs/<str:job_id>/remove/", views.remove, name="remove"),
    path("<str:queue>/jobs/<str:job_id>/cancel/", views.cancel, name="cancel"),
]
