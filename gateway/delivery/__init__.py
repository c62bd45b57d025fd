"""Platform-neutral streamed replies: throttled edits, drafts, splitting.

An adapter implements `Channel` for one chat, keeps a `Throttles` registry (one
`ChatThrottle` per chat) and answers each message through a `StreamedReply`.
"""

from gateway.delivery.channel import Channel, ChannelLimits
from gateway.delivery.links import LinkSink, images_as_links, previews_allowed, trusted_links
from gateway.delivery.splitting import split_message, utf16_units
from gateway.delivery.streaming import StreamedReply
from gateway.delivery.throttle import ChatThrottle, Throttles, max_per_window

__all__ = [
    "Channel",
    "ChannelLimits",
    "ChatThrottle",
    "LinkSink",
    "StreamedReply",
    "Throttles",
    "images_as_links",
    "max_per_window",
    "previews_allowed",
    "split_message",
    "trusted_links",
    "utf16_units",
]
