"""``layerperf models``: the built-in model zoo."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("models", help="list the built-in models", description="List the built-in model zoo.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf.renderers.output import show
    from layerperf.renderers.views.lists import models_view

    show(models_view(), "table")
    return 0
