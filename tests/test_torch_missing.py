"""Without torch: the torch backend and layerperf.torch say how to install it, in one line, exit 2."""

from __future__ import annotations

import sys

import orjson
import pytest

from layerperf import backends
from layerperf.cli import main
from layerperf.errors import MissingDependency


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError


def test_backend_unusable_with_the_install_line(no_torch: None, capsys: pytest.CaptureFixture[str]) -> None:
    avail = backends.get("torch").availability()
    assert not avail.usable and "pip install 'layerperf[torch]'" in (avail.reason or "")
    assert main(["backends", "--format", "json"]) == 0
    found = {b["name"]: b for b in orjson.loads(capsys.readouterr().out)["backends"]}
    assert found["torch"]["usable"] is False
    assert main(["profile", "resnet18", "--backend", "torch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'layerperf[torch]'" in err and "Traceback" not in err


def test_api_says_how_to_install(no_torch: None) -> None:
    import layerperf.torch as lt

    with pytest.raises(MissingDependency, match=r"layerperf\[torch\]"):
        lt.Profiler()
    with pytest.raises(MissingDependency, match=r"layerperf\[torch\]"):
        lt.profile(level=2)
