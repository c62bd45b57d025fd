"""Skills: SKILL.md folders the bot reads, and writes when it learns a procedure.

`SkillsStore` reads the shared folder (bundled, operator's and promoted
skills: read-only to the model, seen by everyone) and each person's own
skills (written by the model in that person's conversations, kept in the data
dir, seen and changed only there), renders each person's prompt index, and
lets an admin promote a person's skill to everyone. `SkillsTools` is the
model's interface to it (`SKILL_TOOL_SCHEMAS`: skills_list, skill_view,
skill_manage), bound to one person and to the primary or a background agent.
People's own skills and the manifest are kept by a `PrivateSkills`: folders in
the data dir (`FolderPrivateSkills`, the default) or PostgreSQL rows
(`memory_core.pg.skills.PgPrivateSkills`); the shared folder is always a folder.
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
    SkillQuotaError,
    SkillSizeError,
    SkillStorageError,
)
from memory_core.skills.format import SkillDocument
from memory_core.skills.private import PrivateSkills, PrivateWrite
from memory_core.skills.private_folders import FolderPrivateSkills
from memory_core.skills.store import GENERAL, Skill, SkillProblem, SkillsStore
from memory_core.skills.tools import SKILL_TOOL_SCHEMAS, SkillChange, SkillsTools

__all__ = [
    "GENERAL",
    "SKILL_TOOL_SCHEMAS",
    "FolderPrivateSkills",
    "PrivateSkills",
    "PrivateWrite",
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
    "SkillQuotaError",
    "SkillSizeError",
    "SkillStorageError",
    "SkillsStore",
    "SkillsTools",
]
