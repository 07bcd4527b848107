"""A griffe extension for the docs build: our docstrings name each argument at the start of a line
("key: the sampling key ...", continued on indented lines); rendered as plain Markdown those lines run together
into one paragraph. This turns each such block into a list item, `key`: ..., without changing the docstrings."""

from __future__ import annotations

import re

import griffe

ARGUMENT = re.compile(r"^(\w+(?:, \w+)*): (.*)$")


def argument_lists(text: str, names: set[str]) -> str:
    """Lines opening with a known name and a colon become list items; their indented continuations stay inside."""
    lines, out, in_item = text.splitlines(), [], False
    for line in lines:
        match = ARGUMENT.match(line)
        if match and set(match.group(1).split(", ")) <= names:
            if not in_item and out and out[-1].strip():
                out.append("")
            names_md = ", ".join(f"`{name}`" for name in match.group(1).split(", "))
            out.append(f"* {names_md}: {match.group(2)}")
            in_item = True
        elif in_item and line.startswith(" ") and line.strip():
            out.append("  " + line.strip())
        else:
            if in_item and line.strip():
                out.append("")
            out.append(line)
            in_item = False
    return "\n".join(out)


def known_names(obj: griffe.Object) -> set[str]:
    names = set(getattr(obj, "members", {}))
    try:
        names |= {parameter.name for parameter in obj.parameters}
    except (AttributeError, ValueError):
        pass
    return names


class ArgumentLists(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        pending = [pkg]
        while pending:
            obj = pending.pop()
            if obj.docstring is not None:
                obj.docstring.value = argument_lists(obj.docstring.value, known_names(obj))
            pending += [member for member in obj.members.values() if not member.is_alias]
