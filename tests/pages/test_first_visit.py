"""What a new player and a new admin tripped over (issue 23, part 5): each
case as they met it, pinned."""
from __future__ import annotations

import pytest

from games.views.common import emoji_name

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("emoji, name", [
    ("🐈‍⬛", "black cat"), ("🐕‍🦺", "service dog"), ("🐻‍❄️", "polar bear"), ("🐦‍⬛", "black bird"),
    ("🐶", "dog face"), ("❄️", "snowflake"), ("❄", "snowflake"), ("🏳️‍🌈", "rainbow flag"),
])
def test_emoji_keys_are_named_as_the_unicode_emoji_data_names_them(emoji, name):
    assert emoji_name(emoji) == name


def test_a_string_the_emoji_data_does_not_know_still_gets_a_label():
    assert emoji_name("\u00e9") == "latin small letter e with acute"
    assert emoji_name("\u200d") == "emoji"


def test_the_keyboard_labels_sequences_by_their_own_names(play, make_round):
    rnd = make_round()  # the whole animals set, 🐈‍⬛ and 🐕‍🦺 among them
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert 'value="🐈‍⬛" class="key" aria-label="black cat"' in page
    assert 'value="🐕‍🦺" class="key" aria-label="service dog"' in page
    assert "cat black large square" not in page and "safety vest" not in page
