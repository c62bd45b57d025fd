"""Skills: SKILL.md folders the bot reads, and writes when it learns a procedure.

`SkillsStore` scans the mounted folder, renders the prompt index, and records
in its manifest which skills the bot wrote, so operators' skills stay
read-only. `SkillsTools` is the model's interface to it (`SKILL_TOOL_SCHEMAS`:
skills_list, skill_view, skill_manage), bound to the primary or a background
agent.
"""

from memory_core.errors import (
    SkillArgumentError,
    SkillError,
    SkillExistsError,
    SkillFormatError,
    SkillManifestError,
    SkillNotFoundError,
    SkillPatchError,
    SkillPathError,
    SkillProtectedError,
    SkillSizeError,
    SkillStorageError,
)
from memory_core.skills.format import SkillDocument
from memory_core.skills.store import GENERAL, Skill, SkillProblem, SkillsStore
from memory_core.skills.tools import SKILL_TOOL_SCHEMAS, SkillChange, SkillsTools

__all__ = [
    "GENERAL",
    "SKILL_TOOL_SCHEMAS",
    "Skill",
    "SkillArgumentError",
    "SkillChange",
    "SkillDocument",
    "SkillError",
    "SkillExistsError",
    "SkillFormatError",
    "SkillManifestError",
    "SkillNotFoundError",
    "SkillPatchError",
    "SkillPathError",
    "SkillProblem",
    "SkillProtectedError",
    "SkillSizeError",
    "SkillStorageError",
    "SkillsStore",
    "SkillsTools",
]
