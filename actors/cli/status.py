"""``paneward status``: every session as the daemon renders it (the table, ``--json``, ``--json
--panes``, ``--counters``), or ``--proofs``: what each harness can prove (no daemon needed).

Short-lived and typed often: its top level imports only what it uses (the standard library; the
daemon renders the table, and the answer is printed as received).
"""

from __future__ import annotations

import sys

from actors.cli.common import (
    EXIT_INVALID,
    EXIT_NO_DAEMON,
    EXIT_OK,
    add_hosts,
    add_socket,
    control_path,
    hosts_fields,
    no_daemon,
)

# Typing only (typing and argparse would cost the command's start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

__all__ = ["add_status", "format_proofs", "proofs_json", "run_status"]


def add_status(parser: argparse.ArgumentParser) -> None:
    add_socket(parser)
    parser.add_argument("--json", action="store_true", help="a JSON list of Activity objects")
    parser.add_argument(
        "--panes",
        action="store_true",
        help="with --json: a JSON list of PaneView objects (which session each pane shows)",
    )
    parser.add_argument(
        "--counters",
        action="store_true",
        help="print every actor's counters (rejected, unmapped, drops, ...) as JSON",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list sessions that ended more than a day ago (the table hides them)",
    )
    parser.add_argument(
        "--proofs",
        action="store_true",
        help="what each harness can prove, and from which evidence (no daemon needed; "
        "with --json as JSON)",
    )
    from actors.cli.nats_view import add_reader_arguments

    add_reader_arguments(parser)
    add_hosts(parser)




def proofs_json() -> dict[str, Any]:
    """``status --proofs --json``: per harness, its summary and, per axis value, the sources that
    prove it (``[]``: it cannot, and that value is never shown as proven for it) and how."""
    from actors.core.session.harness import axis_of
    from actors.harnesses.catalog import SPECS

    return {
        spec.id: {
            "summary": spec.summary,
            "proves": [
                {
                    "axis": axis_of(proof.value),
                    "value": proof.value,
                    "sources": list(proof.sources),
                    "how": proof.how,
                }
                for proof in spec.proofs
            ],
        }
        for spec in SPECS.values()
    }


def format_proofs(table: dict[str, Any]) -> str:
    """``status --proofs``: one line per harness and value; ``-`` where it cannot prove it."""
    lines = []
    for harness, entry in table.items():
        lines.append(f"{harness}: {entry['summary']}")
        for proof in entry["proves"]:
            sources = ", ".join(proof["sources"]) or "cannot prove"
            lines.append(f"  {proof['axis']:<9} {proof['value']:<11} {sources}: {proof['how']}")
    return "\n".join(lines)


def run_status(args: argparse.Namespace) -> int:
    if args.nats:
        from actors.cli.nats_view import run_status_nats

        return run_status_nats(args)
    if args.proofs:
        import json

        table = proofs_json()
        print(json.dumps(table, indent=2) if args.json else format_proofs(table))
        return EXIT_OK
    from actors.cli.control_client import request_chunks

    # The daemon answers in the form asked (the table it renders, the activities, the pane
    # views, the counters): printed as received, so this command needs no JSON module at all.
    form = (
        "counters" if args.counters
        else ("panes" if args.panes else "activities") if args.json
        else "table"
    )
    request = b'{"op": "status", "format": "%s", "all": %s%s}\n' % (
        form.encode(), b"true" if args.all else b"false", hosts_fields(args)
    )
    try:
        reply = b"".join(request_chunks(control_path(args), request))
    except OSError as exc:
        no_daemon(args, "status", exc)
        return EXIT_NO_DAEMON
    if not reply:
        print(f"paneward status: no answer from {control_path(args)}", file=sys.stderr)
        return EXIT_NO_DAEMON
    if reply.startswith(b'{"error"'):
        import json

        from actors.core.text import printable

        message = json.loads(reply)["error"]
        print(f"paneward status: {printable(str(message))}", file=sys.stderr)
        return EXIT_INVALID
    from actors.core.text import json_without_c1

    # The table is escaped by the daemon already; the JSON forms carry C1 controls raw.
    sys.stdout.buffer.write(json_without_c1(reply))
    sys.stdout.flush()
    return EXIT_OK
