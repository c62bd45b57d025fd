"""Platform-neutral streamed replies: throttled edits, drafts, splitting.

An adapter implements `Channel` for one chat, keeps a `Throttles` registry (one
`ChatThrottle` per chat) and answers each message through a `StreamedReply`. A text
quoted to the person as written (a memory entry) goes into a reply as `literal`.
"""

from gateway.delivery.channel import Channel, ChannelLimits
from gateway.delivery.links import LinkSink, images_as_links, previews_allowed, trusted_links
from gateway.delivery.literal import INDENT, literal, unnumbered
from gateway.delivery.splitting import split_message, utf16_units
from gateway.delivery.streaming import StreamedReply
from gateway.delivery.throttle import ChatThrottle, Throttles, max_per_window

__all__ = [
    "INDENT",
    "Channel",
    "ChannelLimits",
    "ChatThrottle",
    "LinkSink",
    "StreamedReply",
    "Throttles",
    "images_as_links",
    "literal",
    "max_per_window",
    "previews_allowed",
    "split_message",
    "trusted_links",
    "unnumbered",
    "utf16_units",
]
