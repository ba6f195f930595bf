"""The JSON format: a view's document, indented, numpy values as their numbers.

The one place layerperf prints JSON; every command's ``--format json`` comes here.
"""

from __future__ import annotations

from typing import Any

import orjson

from layerperf.renderers.view import View

NAME = "json"
SUFFIX = ".json"


def dumps(doc: Any) -> str:
    # orjson writes NaN as null, so an unknown that slipped through still never reads as 0
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n"


def render(view: View) -> str:
    return dumps(view.doc)
