"""``layerperf backends``: the runtimes layerperf profiles on, their versions, and whether each runs here."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("backends", help="list the backends (runtimes) and whether each is usable here",
                       description="List the runtimes layerperf profiles on (`--backend NAME` of profile, memory "
                       "and bench): each one's version here, or why it cannot run, and its own options.")
    p.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    p.set_defaults(func=run)


def rows() -> list[dict[str, Any]]:
    from layerperf import backends
    from layerperf.backends.base import flag_name, option_fields

    out = []
    for name in backends.names():
        backend = backends.get(name)
        avail = backend.availability()
        out.append({"name": name, "usable": avail.usable, "version": avail.version, "reason": avail.reason,
                    "default": name == backends.DEFAULT, "model_suffixes": list(backend.model_suffixes),
                    "options": [flag_name(f.name) for f in option_fields(backend.options_type)
                                if f.metadata.get("flag")],
                    "summary": backend.summary})
    return out


def run(args: argparse.Namespace) -> int:
    from layerperf.renderers import terminal as render
    from layerperf.renderers.tables import to_json

    found = rows()
    if args.format == "json":
        print(to_json({"backends": found}), end="")
        return 0
    shown = [{**r, "usable": "yes" if r["usable"] else "no", "options": " ".join(r["options"]),
              "reason": r["reason"] or "", "name": r["name"] + (" (default)" if r["default"] else "")}
             for r in found]
    cols = [render.Column("name", "backend", str, "left"), render.Column("version", "version", str, "left"),
            render.Column("usable", "usable here", str, "left"), render.Column("reason", "why not", str, "left"),
            render.Column("options", "its flags", str, "left"),
            render.Column("summary", "what it measures", str, "left")]
    render.console().print(render.table(shown, cols, title="backends"))
    return 0
