"""Tool profiles: which built-in tools a model gets, and how they are described to it.

* ``self``: an agent managing its own context (commit, compile, annotate, status, log, compress, branch,
  switch, reset), described as acting on "your context".
* ``supervisor``: all 15 tools, described as acting on "the managed agent's context".
* ``full``: all 15 tools with their default descriptions.

:class:`ToolProfile` (a named allow-list of tools) lives in :mod:`.definitions`, below the built-in tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tractkv.errors import InvalidInput

from .builtin import BUILTIN_NAMES, SELF_DESCRIPTIONS, SUPERVISOR_DESCRIPTIONS, builtin_tools
from .definitions import FORMATS, ToolConfig, ToolDefinition, ToolProfile

SELF_TOOLS = ("commit", "compile", "annotate", "status", "log", "compress", "branch", "switch", "reset")

SELF_PROFILE = ToolProfile(
    "self", {name: ToolConfig(description=SELF_DESCRIPTIONS[name]) for name in SELF_TOOLS}
)
SUPERVISOR_PROFILE = ToolProfile(
    "supervisor", {name: ToolConfig(description=SUPERVISOR_DESCRIPTIONS[name]) for name in BUILTIN_NAMES}
)
FULL_PROFILE = ToolProfile("full", {name: ToolConfig() for name in BUILTIN_NAMES})

PROFILES = {p.name: p for p in (SELF_PROFILE, SUPERVISOR_PROFILE, FULL_PROFILE)}


def get_profile(profile: object) -> ToolProfile:
    """A profile by name (``self``, ``supervisor``, ``full``), or the profile given (anything else is refused).

    Raises:
        ValueError: (:class:`~tractkv.errors.InvalidInput`) an unknown name.
    """
    if isinstance(profile, ToolProfile):
        return profile
    found = PROFILES.get(profile) if isinstance(profile, str) else None
    if found is None:
        raise InvalidInput(f"unknown tool profile {profile!r}; known: {', '.join(PROFILES)}")
    return found


def profile_tools(profile: object, overrides: Mapping[str, str] | None = None) -> list[ToolDefinition]:
    """The built-in tools of a profile (none for None), with ``overrides`` ({name: description}) applied.

    Raises:
        InvalidInput: an unknown profile, or an override for a tool the profile does not offer.
    """
    tools = get_profile(profile).filter_tools(builtin_tools()) if profile is not None else []
    if overrides:
        names = {t.name for t in tools}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise InvalidInput(f"overrides name tools this profile does not offer: {unknown}")
        tools = [t.with_description(overrides[t.name]) if t.name in overrides else t for t in tools]
    return tools


def as_tools(
    profile: object = "self",
    overrides: Mapping[str, str] | None = None,
    format: str = "openai",
) -> list[dict[str, Any]]:
    """The schemas of a profile's tools, ready for an OpenAI or Anthropic request."""
    if format not in FORMATS:
        raise InvalidInput(f"format must be one of {FORMATS}, not {format!r}")
    return [t.to_format(format) for t in profile_tools(profile, overrides)]
