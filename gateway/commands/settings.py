"""/settings: the person's own language, time zone and background-notice mode.

``/settings`` shows the three, each with where it comes from (the person chose
it, their app's language, or the bot's default), and buttons for the language
and the notices (`PendingChoices`: only that person can press them).
``/settings language zh|en|es|auto``, ``/settings timezone Asia/Shanghai|UTC+8|auto``
and ``/settings notices off|on|verbose|auto`` change one; ``auto`` clears it, so
the platform's hint or the configuration decides again. Values are checked
here (`negotiate`, `parse_zone`, `NOTICE_MODES`) and kept by
`PersonSettingsStore` beside the person's USER.md: they are the person's data,
in ``/export`` and erased with them. The answer to a change is written in the
language the person has after it.

Settings are never shown to anyone else: in a group ``/settings`` only points
to a private chat and changes nothing.
"""

from __future__ import annotations

import re

from gateway.commands.choices import PendingChoices
from gateway.commands.registry import Command, CommandContext, CommandReply, PendingChoice
from gateway.errors import ChoiceRefusedError
from gateway.i18n import LANGUAGE_NAMES, LANGUAGES, N_, negotiate, parse_zone, zone_name
from gateway.messages import CommandArgument
from gateway.person_locale import PersonLocale, PersonLocales
from memory_core import NOTICE_MODES, NoticeMode

COMMAND = "settings"
VERSION = "settings"
AUTO = "auto"

IN_GROUP = N_(
    "Your settings are yours alone, so I show and change them only in a private chat with "
    "me: send /settings there. Nothing was changed."
)
USAGE = N_(
    "Change a setting with /settings language zh|en|es|auto, "
    "/settings timezone Asia/Shanghai|UTC+8|auto or /settings notices off|on|verbose|auto "
    "(auto: back to the default)."
)
LANGUAGE_VALUES = N_("Languages I speak: zh (简体中文), en (English), es (Español), or auto.")
ZONE_VALUES = N_(
    "I don't know the time zone “{value}”. Send a name like Asia/Shanghai or Europe/Madrid, "
    "an offset from UTC-12 to UTC+14 like UTC+8 or UTC+5:30, or auto."
)
NOTICE_VALUES = N_("Background notices can be off, on, verbose, or auto.")
UNKNOWN_SETTING = N_(
    "There is no setting called “{name}”; the settings are language, timezone and notices."
)
NUMBER_BUTTONS = N_("Send /settings #1 to /settings #{count} to pick one of these:")

CHOSEN = N_("you chose it")
FROM_APP = N_("from your app")
DEFAULT = N_("the default")
NOTICE_NAMES: dict[str, str] = {
    "off": N_("off (nothing is said when I learn something)"),
    "on": N_("on (one line when I learn something)"),
    "verbose": N_("verbose (that line with each entry, in a private chat)"),
}
AS_MY_APP = N_("Language: as my app")
NOTICE_BUTTONS: dict[str, str] = {
    "off": N_("Notices: off"),
    "on": N_("Notices: on"),
    "verbose": N_("Notices: verbose"),
    AUTO: N_("Notices: default"),
}

_TOPICS = {
    "language": "language", "lang": "language", "语言": "language", "語言": "language",
    "idioma": "language", "lengua": "language",
    "timezone": "timezone", "zone": "timezone", "tz": "timezone", "time zone": "timezone",
    "时区": "timezone", "時區": "timezone", "zona": "timezone", "zona horaria": "timezone",
    "notices": "notices", "notice": "notices", "notifications": "notices", "通知": "notices",
    "提醒": "notices", "avisos": "notices", "notificaciones": "notices",
}  # fmt: skip
_AUTO_WORDS = frozenset(
    {"auto", "default", "reset", "clear", "自动", "默认", "自動", "默認", "automático",
     "automatico", "predeterminado", "por defecto"}
)  # fmt: skip
_LANGUAGE_WORDS = {
    "英文": "en", "英语": "en", "英語": "en", "inglés": "en", "ingles": "en",
    "汉语": "zh", "漢語": "zh", "简体": "zh", "chino": "zh", "中文简体": "zh",
    "西班牙语": "es", "西班牙文": "es", "西語": "es", "castellano": "es",
}  # fmt: skip
_NOTICE_WORDS: dict[str, NoticeMode] = {
    "off": "off", "on": "on", "verbose": "verbose",
    "关": "off", "关闭": "off", "關閉": "off", "开": "on", "开启": "on", "打开": "on",
    "開啟": "on", "详细": "verbose", "詳細": "verbose",
    "no": "off", "apagado": "off", "desactivado": "off", "desactivados": "off",
    "sí": "on", "si": "on", "activado": "on", "activados": "on", "detallado": "verbose",
    "detallados": "verbose",
}  # fmt: skip
_PICK = re.compile(r"#?([0-9]{1,2})")


def settings_command(
    locales: PersonLocales, choices: PendingChoices, notifications: NoticeMode
) -> Command:
    """/settings over `locales` (their `settings` store keeps what is chosen), offering
    buttons through `choices`; `notifications`: the configuration's notice mode."""
    settings = _Settings(locales, choices, notifications)
    return Command(
        COMMAND,
        N_("your language, time zone and background notices"),
        settings.handle,
        arguments=(
            CommandArgument("setting", N_("language, timezone or notices, and a value"), False),
        ),
        on_choice=settings.apply_choice,
    )


class _Settings:
    def __init__(
        self, locales: PersonLocales, choices: PendingChoices, notifications: NoticeMode
    ) -> None:
        self._locales = locales
        self._choices = choices
        self._notifications = notifications

    async def handle(self, ctx: CommandContext) -> CommandReply:
        """``/settings`` shows them; ``/settings <setting> <value>`` changes one."""
        if ctx.message.chat_type != "private":
            return CommandReply(ctx.locale._(IN_GROUP))
        args = " ".join(ctx.args.split())
        if not args:
            return self._overview(ctx)
        pick = _PICK.fullmatch(args)
        if pick is not None:
            key = ctx.identity.user_key
            try:
                picked = self._choices.take_numbered(key, COMMAND, int(pick.group(1)))
            except ChoiceRefusedError as exc:
                return CommandReply(exc.line(ctx.locale))
            return await self.apply_choice(ctx, picked)
        topic, value = _topic(args)
        if topic is None:
            name = args.split(" ", 1)[0]
            return CommandReply(ctx.locale._(UNKNOWN_SETTING, name=name))
        if not value:
            return CommandReply(ctx.locale._(USAGE))
        return self._change(ctx, topic, value)

    async def apply_choice(self, ctx: CommandContext, picked: PendingChoice) -> CommandReply:
        """A pressed button: ``language:<code|auto>`` or ``notices:<mode|auto>``."""
        if ctx.message.chat_type != "private":
            return CommandReply(ctx.locale._(IN_GROUP))
        topic, _, value = picked.value.partition(":")
        return self._change(ctx, topic, value)

    def _overview(self, ctx: CommandContext) -> CommandReply:
        locale, chosen = ctx.locale, ctx.locale.settings
        default = self._locales.default()
        if chosen.language and negotiate(chosen.language):
            source = CHOSEN
        elif negotiate(ctx.message.language) or locale.language != default.language:
            source = FROM_APP  # this message's hint, or the latest one remembered
        else:
            source = DEFAULT
        mode = locale.notices or self._notifications
        lines = [
            locale._("Your settings (only you see them):"),
            locale._(
                "Language: {language} ({source})",
                language=LANGUAGE_NAMES[locale.language],
                source=locale._(source),
            ),
            locale._(
                "Time zone: {zone}, now {time} ({source})",
                zone=locale.zone_label,
                time=locale.now().strftime("%H:%M"),
                source=locale._(CHOSEN if chosen.timezone else DEFAULT),
            ),
            locale._(
                "Background notices: {mode} ({source})",
                mode=locale._(NOTICE_NAMES[mode]),
                source=locale._(CHOSEN if chosen.notices else DEFAULT),
            ),
            locale._(USAGE),
        ]
        options = [(LANGUAGE_NAMES[code], f"language:{code}") for code in LANGUAGES]
        options.append((locale._(AS_MY_APP), f"language:{AUTO}"))
        options += [(locale._(NOTICE_BUTTONS[m]), f"notices:{m}") for m in (*NOTICE_MODES, AUTO)]
        offered = self._choices.offer(ctx.identity.user_key, COMMAND, options, VERSION)
        lines.append(locale._(NUMBER_BUTTONS, count=len(offered)))
        return CommandReply("\n".join(lines), offered)

    def _change(self, ctx: CommandContext, topic: str, value: str) -> CommandReply:
        """Set or clear one setting; the answer in the person's language after it."""
        word = value.strip().casefold()
        clear = word in _AUTO_WORDS
        locale = ctx.locale
        if topic == "language":
            language = None if clear else negotiate(word) or _LANGUAGE_WORDS.get(word)
            if language is None and not clear:
                return CommandReply(locale._(LANGUAGE_VALUES))
            after = self._update(ctx, language=language)
            if clear:
                line = N_("I write to you in your app's language again: {language}.")
            else:
                line = N_("From now on I write to you in {language}.")
            return CommandReply(after._(line, language=LANGUAGE_NAMES[after.language]))
        if topic == "timezone":
            zone = None if clear else parse_zone(value)
            if zone is None and not clear:
                return CommandReply(locale._(ZONE_VALUES, value=value.strip()))
            after = self._update(ctx, timezone=None if zone is None else zone_name(zone))
            if clear:
                line = N_("Your time zone is the default again: {zone} (now {time} there).")
            else:
                line = N_("Your time zone is {zone} now (it is {time} there).")
            now = after.now().strftime("%H:%M")
            return CommandReply(after._(line, zone=after.zone_label, time=now))
        if topic == "notices":
            mode = None if clear else _NOTICE_WORDS.get(word)
            if mode is None and not clear:
                return CommandReply(locale._(NOTICE_VALUES))
            after = self._update(ctx, notices=mode)
            shown = after._(NOTICE_NAMES[after.notices or self._notifications])
            if clear:
                line = N_("Background notices are the default again: {mode}.")
            else:
                line = N_("Background notices: {mode}.")
            return CommandReply(after._(line, mode=shown))
        return CommandReply(locale._(UNKNOWN_SETTING, name=topic))

    def _update(self, ctx: CommandContext, **changes: str | None) -> PersonLocale:
        """Write `changes` for the sender (`PersonErasedError` when they were erased
        meanwhile: the conversation answers it); their locale after it."""
        key = ctx.identity.user_key
        store = self._locales.settings
        assert store is not None  # a bot whose people choose nothing has no /settings
        self._locales.chosen(key, store.update(key, **changes))
        return self._locales.of_person(key, negotiate(ctx.message.language))


def _topic(args: str) -> tuple[str | None, str]:
    """The setting `args` names first (one or two words) and the value after it."""
    words = args.split(" ")
    for size in (2, 1):
        name = " ".join(words[:size]).casefold()
        if len(words) >= size and name in _TOPICS:
            return _TOPICS[name], " ".join(words[size:])
    return None, ""
