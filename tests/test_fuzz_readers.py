"""No input crashes the loader: it returns a table or raises InputError (one line at the CLI)."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layerperf.errors import InputError
from layerperf.readers.detect import read_table

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
JSON = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids,
                                                                                       max_size=4), max_leaves=12)
KEYS = st.sampled_from(["ph", "name", "cat", "ts", "dur", "pid", "tid", "args", "op_name", "provider",
                        "input_type_shape", "Input Dims", "External id", "correlation", "flops", "bytes"])
VALUES = st.one_of(SCALARS, st.sampled_from(["X", "B", "E", "Node", "Session", "cpu_op", "kernel",
                                             "cuda_runtime", "a_kernel_time", "model_run"]), JSON)
EVENT = st.dictionaries(KEYS, VALUES, max_size=8) | JSON
DOC = st.one_of(st.lists(EVENT, max_size=12),
                st.fixed_dictionaries({"traceEvents": st.lists(EVENT, max_size=12)},
                                      optional={"schemaVersion": SCALARS, "otherData": JSON}),
                JSON)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(data: bytes, name: str = "t.json", block: int = 1 << 20) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            table = read_table(path, block=block)
        except InputError as exc:
            assert "\n" not in str(exc)
        else:
            assert len(table) > 0


@FUZZ
@given(DOC, st.sampled_from([1 << 20, 64, 17]))
def test_json_documents(doc: Any, block: int) -> None:
    _read(orjson.dumps(doc), block=block)


@FUZZ
@given(DOC, st.data())
def test_damaged_documents(doc: Any, data: st.DataObject) -> None:
    raw = orjson.dumps(doc)
    cut = data.draw(st.integers(0, len(raw)))
    junk = data.draw(st.binary(max_size=6))
    _read(raw[:cut] + junk + raw[cut + len(junk):], block=data.draw(st.sampled_from([1 << 20, 32])))


@FUZZ
@given(st.binary(max_size=200), st.booleans())
def test_bytes(raw: bytes, zipped: bool) -> None:
    _read(gzip.compress(raw) if zipped else raw, "t.json.gz" if zipped else "t.json")
