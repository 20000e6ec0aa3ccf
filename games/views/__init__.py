"""The player pages. Small function views; the game rules stay in the
domain modules (``guesses``, ``locks``, ``wallet``, ``settlement``) and the
views only translate between HTTP and those calls."""
from .account import LoginView, exchange, mark_notifications_read, notifications, signup, wallet_page
from .play import compose, guess, leaderboard_page, lobby, lock, my_guesses, round_page

__all__ = ["LoginView", "compose", "exchange", "guess", "leaderboard_page", "lobby", "lock", "mark_notifications_read",
           "my_guesses", "notifications", "round_page", "signup", "wallet_page"]
