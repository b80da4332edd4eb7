"""``status`` and ``watch`` parsed without argparse: the commands a user types most start fast.

:func:`actors.cli.entry` hands plain ``status`` / ``watch`` command lines here before anything
else is imported; what this parser does not know goes to the full parser
(:func:`actors.cli.main.main`), which prints its usage errors. ``tests/test_design.py`` checks
that the two agree.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["quick"]


class _Args:
    """Arguments parsed by :func:`quick` (the attribute names argparse gives them)."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


#: The direct NATS reader's options (actors.cli.nats_view.add_reader_arguments).
_NATS: dict[str, str] = {
    "--nats": "nats", "--nats-creds": "nats_creds", "--nats-nkey": "nats_nkey",
}
#: What :func:`quick` understands: per command, its flags (-> True) and its valued options.
_QUICK: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "status": (
        {
            "--json": "json",
            "--panes": "panes",
            "--counters": "counters",
            "--all": "all",
            "--proofs": "proofs",
            "--local": "local",
        },
        {"--socket": "socket", "--host": "host", **_NATS},
    ),
    "watch": (
        {"--json": "json", "--fleet": "fleet", "--local": "local"},
        {"--socket": "socket", "--since": "since", "--host": "host", **_NATS},
    ),
}


def quick(argv: list[str]) -> tuple[str, argparse.Namespace] | None:
    """``status`` / ``watch`` arguments parsed without argparse, when they are plain (flags and
    ``--opt VALUE`` / ``--opt=VALUE`` it knows, a non-negative ``--since``). Anything else
    (help, a typo, a bad value) returns None, and the full parser handles it, errors included."""
    if not argv or argv[0] not in _QUICK:
        return None
    flags, valued = _QUICK[argv[0]]
    values: dict[str, object] = dict.fromkeys(flags.values(), False)
    values.update(dict.fromkeys(valued.values()))
    rest = argv[1:]
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if not eq and word in flags:
            values[flags[word]] = True
        elif name in valued:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            values[valued[name]] = value
        else:
            return None
    if values.get("local") and values.get("host") is not None:
        return None  # a usage error: argparse prints it
    if values.get("panes") and not values["json"]:
        return None  # a usage error: argparse prints it (actors.cli.main)
    since = values.get("since")
    if isinstance(since, str):
        if not since.isdigit():
            return None
        values["since"] = int(since)
    return argv[0], _Args(**values)  # type: ignore[return-value]  # the same attributes
