"""The staging decision: which memory-tool writes wait for the person's approval.

An `Approval` is bound to one memory tool (one turn's, or one background
run's). A request to the person's USER.md waits, staged in `PendingChanges`,
when any of its entries reads as an instruction
(`memory_core.safety.instruction_reasons`: a link, an e-mail address, code, an
order to the assistant), whatever the configuration; when the judge (an
auxiliary model asked "fact or instruction?", see `verdicts`) did not answer
"fact" for it; or when `everything` is set (``memory.write_approval`` covers
this writer). One staged operation of a request stages the whole request, each
operation with its own reason, so a consolidation is approved as it was meant.

The operations are first tried in turn on the current entries (the budget
left for approval time): a request the tool would refuse (no match, several
matches, the safety scan) is not staged but refused by the tool's own write,
with its reason, and a replace or remove is pinned to the whole entry it matched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from memory_core.errors import MemoryCoreError
from memory_core.file_memory.edits import Operation, apply_operations
from memory_core.file_memory.entries import normalise_entry
from memory_core.file_memory.origin import Origin
from memory_core.file_memory.pending import PendingChanges, Proposal, StagedChange

UNLIMITED = 10**9  # the budget is checked when a staged change is approved, not now
EVERYTHING_BACKGROUND = "what I learn in the background waits for your approval"
EVERYTHING_PERSON = "every memory change waits for your approval"
WITH_OTHERS = "it was proposed together with a change that waits for your approval"
JUDGE_UNSURE = "the judge could not confirm it is a fact"


@dataclass
class Approval:
    """How one memory tool stages: where to, whether everything waits, the judge's verdicts."""

    pending: PendingChanges
    everything: bool
    batch: str
    verdicts: dict[str, str] = field(default_factory=dict)
    """The judge's answer ("fact", or anything else) for each content it was asked about;
    filled by the async caller before the tool runs. Content missing here was not judged."""
    judging: bool = False  # the judge is on: unjudged content counts as unconfirmed
    ungrounded: dict[str, str] = field(default_factory=dict)
    """New entries the person's words do not ground, by their text, with the reason each
    waits for (its evidence is then the closest message, shown and never written); set
    by the grounding check for the call being staged."""
    reasons: Callable[[str], tuple[str, ...]] | None = None  # None: the safety rules'
    staged: list[StagedChange] = field(default_factory=list)

    def proposals(
        self, entries: Sequence[str], operations: Sequence[Operation], origin: Origin
    ) -> list[Proposal]:
        """What to stage for `operations` on `entries`: empty when they may be written now."""
        proposals: list[Proposal] = []
        waits = False
        work = tuple(entries)
        for op in operations:
            try:
                outcome = apply_operations(work, [op], UNLIMITED)  # in turn, as a batch runs
            except MemoryCoreError:
                return []  # the tool's own write refuses it the same way, with its reason
            proposal = self._proposal(work, outcome.entries, op, origin)
            work = outcome.entries
            if proposal is None:
                continue  # an identical entry exists: nothing to do
            waits = waits or bool(proposal.reason)
            proposals.append(proposal)
        if not waits:
            return []
        return [p if p.reason else _with_reason(p, WITH_OTHERS) for p in proposals]

    def stage(
        self, user_key: str, proposals: Sequence[Proposal], origin: Origin
    ) -> tuple[StagedChange, ...]:
        """Stage `proposals` in this tool's batch; the staged changes."""
        staged = self.pending.stage(user_key, proposals, origin, self.batch)
        self.staged.extend(staged)
        return staged

    def _unconfirmed(self, content: str, op: Operation, origin: Origin) -> bool:
        """Whether the judge is on for this background write and did not answer "fact"."""
        if not self.judging or origin.kind not in ("review", "extraction"):
            return False
        verdict = self.verdicts.get(content, self.verdicts.get(op.content or "", ""))
        return verdict != "fact"

    def _reasons(self, text: str) -> tuple[str, ...]:
        if self.reasons is not None:
            return self.reasons(text)
        # Loaded on first use: the instruction rules compile when first needed.
        from memory_core.safety import instruction_reasons

        return instruction_reasons(text)

    def _proposal(
        self, entries: Sequence[str], result: Sequence[str], op: Operation, origin: Origin
    ) -> Proposal | None:
        if tuple(result) == tuple(entries):
            return None
        before, after = list(entries), list(result)
        against = None if op.action == "add" else _changed_entry(before, after)
        content = None if op.action == "remove" else normalise_entry(op.content or "")
        flags = self._reasons(content) if content is not None else ()
        why = list(flags)
        if content is not None and self._unconfirmed(content, op, origin):
            why.append(JUDGE_UNSURE)
        not_grounded = None if content is None else self.ungrounded.get(content.strip())
        if not_grounded is not None:
            why.append(not_grounded)
        if not why and self.everything:
            why.append(EVERYTHING_PERSON if origin.kind == "person" else EVERYTHING_BACKGROUND)
        evidence = op.evidence if content is not None else ()
        grounded = not_grounded is None
        reason = "; ".join(why)
        return Proposal(op.action, content, against, reason, bool(flags), evidence, grounded)


def _with_reason(proposal: Proposal, reason: str) -> Proposal:
    return replace(proposal, reason=reason)


def _changed_entry(before: list[str], after: list[str]) -> str:
    """The entry of `before` that a replace or remove changed (the first that differs)."""
    for i, entry in enumerate(before):
        if i >= len(after) or after[i] != entry:
            return entry
    raise AssertionError("a replace or remove that changed nothing")
