"""The player pages. Log out is Django's own view (a POST); log in is
Django's with a 400 on a refused form; everything else is in ``games.views``."""
from django.contrib.auth import views as auth_views
from django.urls import path

from . import views
from .views.pages import alerts, favicon, profile, rules
from .views.play import get_shows_round
from .views.watch import watch_live, watch_page

urlpatterns = [
    path("", views.lobby, name="lobby"),
    path("signup/", views.signup, name="signup"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("rounds/<str:round_id>/", views.round_page, name="round"),
    # POST-only addresses answer a GET with the round page (post/redirect/get).
    path("rounds/<str:round_id>/compose/", get_shows_round(views.compose), name="compose"),
    path("rounds/<str:round_id>/lock/", get_shows_round(views.lock), name="lock"),
    path("rounds/<str:round_id>/guess/", get_shows_round(views.guess), name="guess"),
    path("rounds/<str:round_id>/my-guesses.json", views.my_guesses, name="my_guesses"),
    path("rounds/<str:round_id>/leaderboard/", views.leaderboard_page, name="leaderboard"),
    # A round anyone may watch, logged in or not (games.watch says what it shows).
    path("watch/<str:round_id>/", watch_page, name="watch"),
    path("watch/<str:round_id>/live.json", watch_live, name="watch_live"),
    path("wallet/", views.wallet_page, name="wallet"),
    path("wallet/exchange/", views.exchange, name="exchange"),
    path("notifications/", views.notifications, name="notifications"),
    path("notifications/read/", views.mark_notifications_read, name="notifications_read"),
    path("rules/", rules, name="rules"),
    path("me/", profile, name="me"),
    path("me/alerts/", alerts, name="alerts"),
    path("players/<str:username>/", profile, name="profile"),
    path("favicon.ico", favicon),
]
