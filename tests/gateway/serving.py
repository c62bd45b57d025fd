"""Conversations for tests, built in one call by the composition root."""

from __future__ import annotations

from gateway.access import AccessPolicy
from gateway.app import Services, build_conversations
from gateway.commands.erase import PendingErasures
from gateway.conversation import Conversations
from gateway.jobs import BackgroundWork


def serving(
    services: Services,
    access: AccessPolicy | None = None,
    background: BackgroundWork | None = None,
    erasures: PendingErasures | None = None,
) -> Conversations:
    """`build_conversations` over `services`; `access` by default serves everyone, with the
    configuration's admins (the tests' explicit "everyone" policy)."""
    if access is None:
        access = AccessPolicy.everyone(services.config.admins)
    return build_conversations(services, access, background=background, erasures=erasures)
