"""Markdown pages as the tests that keep the README and docs/ true read them."""

from __future__ import annotations


def code_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced code block, in order, fences left out."""
    blocks: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    return blocks
