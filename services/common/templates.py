"""Checks of `str.format` prompt templates, run at start-up so a broken edit fails early."""

from __future__ import annotations

import string
from collections.abc import Collection


class TemplateError(ValueError):
    """A template whose placeholders are not the expected ones, or that does not parse."""


def placeholders(template: str) -> list[str]:
    """Field names of a `str.format` template, in order, repeats included."""
    try:
        return [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    except ValueError as exc:  # a lone "{" or "}"
        raise TemplateError(f"malformed template: {exc}") from exc


def check_template(name: str, template: str, expected: Collection[str]) -> None:
    """Raises TemplateError unless `template` has each expected placeholder exactly once."""
    found = placeholders(template)
    if sorted(found) != sorted(expected):
        raise TemplateError(
            f"{name} has placeholders {found}, expected each of {sorted(expected)} exactly once"
        )
