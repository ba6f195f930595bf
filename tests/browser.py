"""A small headless-Chromium driver for the tests: chromedriver's W3C WebDriver HTTP API over urllib.

No dependency beyond the standard library and the Debian packages `chromium` and `chromium-driver`.
`Browser.start()` launches chromedriver on a free port and opens one session with a fresh profile
directory; `close()` ends the session, stops chromedriver and removes the profile, whatever state they
are in. Pages are read through the DOM (`execute`) and driven with real input events (`click`, `type`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# The W3C name of the key under which an element reference travels.
ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"

CHROME_ARGS = (
    "--headless",
    "--no-sandbox",  # tests run as root in CI containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers' /dev/shm is often 64 MiB
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--window-size=1400,1000",
)


class WebDriverError(RuntimeError):
    """A WebDriver command answered with an error (`error` is the W3C error code, e.g. "no such alert")."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error


def truthy_env(name: str) -> bool:
    """Whether an environment variable is set to something other than "", "0", "false" or "no"."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def find_binaries() -> tuple[Path, Path] | None:
    """(chromium, chromedriver): $LAYERPERF_CHROMIUM / $LAYERPERF_CHROMEDRIVER, else PATH; None if one is missing."""
    chromium = os.environ.get("LAYERPERF_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("LAYERPERF_CHROMEDRIVER") or shutil.which("chromedriver")
    if not chromium or not driver or not Path(chromium).exists() or not Path(driver).exists():
        return None
    return Path(chromium), Path(driver)


MISSING = ("Chromium not found (need `chromium` and `chromedriver` on PATH, from the Debian packages chromium and "
           "chromium-driver: `make system-deps` as root installs them; or set LAYERPERF_CHROMIUM and "
           "LAYERPERF_CHROMEDRIVER)")


def require_binaries() -> tuple[Path, Path]:
    """(chromium, chromedriver), else skip the test with the reason; under CI (CI set) fail it instead, so that
    a green CI run cannot hide browser tests that never ran."""
    found = find_binaries()
    if found is not None:
        return found
    if truthy_env("CI"):
        pytest.fail(f"CI is set and the browser tests cannot run: {MISSING}", pytrace=False)
    pytest.skip(MISSING)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Browser:
    """One chromedriver process and one headless Chromium session."""

    chromium: Path
    chromedriver: Path
    timeout_s: float = 30.0
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _profile_dir: str | None = field(default=None, repr=False)
    _base: str = ""
    _session: str | None = None
    log_path: Path | None = None

    # --- life cycle -------------------------------------------------------------------------------

    def start(self) -> Browser:
        """Launch chromedriver and open a session; on any failure, leave nothing running."""
        try:
            self._launch_driver()
            self._profile_dir = tempfile.mkdtemp(prefix="layerperf-chromium-")
            caps = {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": str(self.chromium),
                    "args": [*CHROME_ARGS, f"--user-data-dir={self._profile_dir}"],
                },
                "goog:loggingPrefs": {"browser": "ALL"},
                "unhandledPromptBehavior": "ignore",  # an alert stays open, for alert_text() to see
            }
            value = self._http("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
            self._session = str(value["sessionId"])
        except BaseException:
            self.close()
            raise
        return self

    def _launch_driver(self) -> None:
        handle, name = tempfile.mkstemp(prefix="layerperf-chromedriver-", suffix=".log")
        os.close(handle)
        self.log_path = Path(name)
        for _attempt in range(3):  # a free port can be taken between the probe and chromedriver's bind
            port = _free_port()
            self._base = f"http://127.0.0.1:{port}"
            self._proc = subprocess.Popen(
                [str(self.chromedriver), f"--port={port}", f"--log-path={self.log_path}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline and self._proc.poll() is None:
                try:
                    if self._http("GET", "/status", timeout_s=2.0).get("ready"):
                        return
                except (OSError, WebDriverError):
                    pass
                time.sleep(0.05)
            self._stop_driver()
        tail = self.log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"chromedriver did not start; its log ends:\n{tail}")

    def close(self) -> None:
        """End the session, stop chromedriver and remove the profile directory (each step whatever the others did)."""
        if self._session is not None:
            with contextlib.suppress(OSError, WebDriverError):
                self._http("DELETE", f"/session/{self._session}", timeout_s=10.0)
            self._session = None
        self._stop_driver()
        if self._profile_dir is not None:
            shutil.rmtree(self._profile_dir, ignore_errors=True)
            self._profile_dir = None
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def _stop_driver(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self._proc = None

    def __enter__(self) -> Browser:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- transport --------------------------------------------------------------------------------

    def _http(self, method: str, path: str, body: dict[str, Any] | None = None,
              timeout_s: float | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        request = urllib.request.Request(self._base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json; charset=utf-8"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s) as response:
                payload = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:  # W3C errors come as 4xx/5xx with a JSON body
            try:
                payload = json.loads(exc.read() or b"{}")
            except ValueError:
                raise WebDriverError("http error", f"{exc.code} {exc.reason}") from exc
        value = payload.get("value")
        if isinstance(value, dict) and "error" in value:
            lines = str(value.get("message", "")).splitlines()  # later lines: chromedriver's stack
            raise WebDriverError(str(value["error"]), lines[0] if lines else "")
        return value

    def _cmd(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        if self._session is None:
            raise RuntimeError("the browser is not started")
        return self._http(method, f"/session/{self._session}{path}", body)

    # --- commands ---------------------------------------------------------------------------------

    def get(self, url: str) -> None:
        """Navigate and wait for the load event (WebDriver's default page-load strategy)."""
        self._cmd("POST", "/url", {"url": url})

    def open_file(self, path: Path) -> None:
        self.get(path.resolve().as_uri())

    def execute(self, script: str, *args: Any) -> Any:
        """Run a function body in the page (`arguments[i]` are args; element references pass both ways)."""
        return self._cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css: str) -> str:
        """The element reference of the first match of a CSS selector (WebDriverError "no such element")."""
        return str(self._cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT_KEY])

    def find_all(self, css: str) -> list[str]:
        found = self._cmd("POST", "/elements", {"using": "css selector", "value": css})
        return [str(item[ELEMENT_KEY]) for item in found]

    @staticmethod
    def ref(element: str) -> dict[str, str]:
        """An element reference as a script argument."""
        return {ELEMENT_KEY: element}

    def click(self, element: str) -> None:
        """A real click (scrolls the element into view, hit-tests, dispatches mouse events)."""
        self._cmd("POST", f"/element/{element}/click")

    def type(self, element: str, text: str) -> None:
        """Key events for each character of text, as a user typing into the focused element."""
        self._cmd("POST", f"/element/{element}/value", {"text": text})

    def hover(self, element: str, x: int = 0, y: int = 0) -> None:
        """Move the mouse pointer to the centre of an element, or (x, y) from it (mousemove/mouseover events, as
        a user's)."""
        move = {"type": "pointerMove", "duration": 0, "origin": self.ref(element), "x": x, "y": y}
        self._cmd("POST", "/actions", {"actions": [
            {"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": [move]}]})

    def wheel(self, element: str, delta_y: float, x: int = 0, y: int = 0, delta_x: float = 0) -> None:
        """A mouse wheel turned over an element (x, y: offset from its centre): deltaY < 0 is away from the user."""
        scroll = {"type": "scroll", "x": x, "y": y, "deltaX": delta_x, "deltaY": delta_y, "duration": 0,
                  "origin": self.ref(element)}
        self._cmd("POST", "/actions", {"actions": [{"type": "wheel", "id": "wheel", "actions": [scroll]}]})

    def drag(self, element: str, x0: int, x1: int, y: int = 0) -> None:
        """Press the mouse at (x0, y) from an element's centre, move to (x1, y), release: a user's drag."""
        moves = [{"type": "pointerMove", "duration": 0, "origin": self.ref(element), "x": x0, "y": y},
                 {"type": "pointerDown", "button": 0},
                 {"type": "pointerMove", "duration": 100, "origin": self.ref(element), "x": x1, "y": y},
                 {"type": "pointerUp", "button": 0}]
        self._cmd("POST", "/actions", {"actions": [
            {"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": moves}]})

    def clear(self, element: str) -> None:
        self._cmd("POST", f"/element/{element}/clear")

    def alert_text(self) -> str | None:
        """The text of an open alert/confirm/prompt dialog, or None when none is open."""
        try:
            return str(self._cmd("GET", "/alert/text"))
        except WebDriverError as exc:
            if exc.error == "no such alert":
                return None
            raise

    def dismiss_alert(self) -> None:
        self._cmd("POST", "/alert/dismiss")

    def console_log(self) -> list[dict[str, Any]]:
        """The browser log entries since the last call ({level, message, source, timestamp}); the log is drained."""
        entries = self._cmd("POST", "/se/log", {"type": "browser"})
        return list(entries or [])

    def console_errors(self) -> list[str]:
        """The messages of the SEVERE browser log entries since the last call: uncaught exceptions,
        console.error, failed loads and Content-Security-Policy violations."""
        return [str(e.get("message")) for e in self.console_log() if e.get("level") == "SEVERE"]

    def screenshot(self, full_page: bool = True) -> bytes:
        """A PNG of the page: the whole document when full_page, else the viewport. The whole document is
        taken by growing the window to its height (then restoring it), so that content the page renders only
        on screen (content-visibility: auto, lazy sections) is drawn, as a user scrolling to it would see it."""
        if not full_page:
            return base64.b64decode(self._cmd("GET", "/screenshot"))
        rect = self._cmd("GET", "/window/rect")
        height = int(self.execute("return Math.ceil(document.documentElement.scrollHeight)"))
        # the window's height includes no browser chrome in headless mode; cap it for a page gone wild
        self._cmd("POST", "/window/rect", {"width": rect["width"], "height": min(max(height, 100), 16_000)})
        try:
            self.execute("return new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
            return base64.b64decode(self._cmd("GET", "/screenshot"))
        finally:
            self._cmd("POST", "/window/rect", {"width": rect["width"], "height": rect["height"]})

    def element_screenshot(self, element: str) -> bytes:
        """A PNG of one element (scrolled into view first)."""
        return base64.b64decode(self._cmd("GET", f"/element/{element}/screenshot"))

    def wait_for(self, script: str, timeout_s: float = 10.0) -> Any:
        """Poll a script until it returns a truthy value; TimeoutError with the last value otherwise."""
        deadline = time.monotonic() + timeout_s
        value = self.execute(script)
        while not value and time.monotonic() < deadline:
            time.sleep(0.05)
            value = self.execute(script)
        if not value:
            raise TimeoutError(f"waited {timeout_s} s for: {script} (last value {value!r})")
        return value
