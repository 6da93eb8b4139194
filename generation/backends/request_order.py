"""The order prompts are sent in when they come in groups (a key per prompt: one document's sub-questions under a
document-first prompt): each group's prompts together, the groups in the order their first prompt came. A server's
prefix cache (vLLM's automatic prefix caching, SGLang's radix cache) then holds a group's document while the rest of
the group arrives; the transformers backend computes it once (generation/backends/prefix_groups.py)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def grouped_order(groups: Sequence[Hashable]) -> list[int]:
    """Indices of `groups` with each group's members together, groups by first appearance, members in given order."""
    members: dict[Hashable, list[int]] = {}
    for i, key in enumerate(groups):
        members.setdefault(key, []).append(i)
    return [i for indices in members.values() for i in indices]


def leaders(groups: Sequence[Hashable]) -> list[bool]:
    """Whether each prompt is the first of its group (the one whose prefix the others find cached)."""
    seen: set = set()
    firsts = []
    for key in groups:
        firsts.append(key not in seen)
        seen.add(key)
    return firsts
