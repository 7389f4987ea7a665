"""report.html in a real browser: headless Debian chromium driven over the DevTools protocol
(websocket-client). Fails on any console error or uncaught exception, checks that the plots
and tables are there and that the page's script works (sorting, flame graph zoom), and takes
a screenshot that must be a PNG with real content.

Chromium comes from scripts/ensure-system-deps.sh (apt, Debian package `chromium`).
Set MYACCEL_REPORT_SCREENSHOT=PATH to keep the screenshot (docs/report-screenshot.png is
made that way).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from myaccel.report import write_report

pytestmark = pytest.mark.integration

FIX = Path(__file__).parents[1] / "fixtures" / "report"
DEMO = FIX / "accelerate-demo"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--window-size=1280,4000",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("chromium is not installed (scripts/ensure-system-deps.sh installs it)")


class Browser:
    """One headless chromium with one page, spoken to over the DevTools protocol."""

    def __init__(self, exe: str, profile_dir: Path) -> None:
        import websocket

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                pytest.fail("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        ws_url = ""
        while not ws_url:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as fh:
                pages = [t for t in json.load(fh) if t.get("type") == "page"]
            ws_url = pages[0]["webSocketDebuggerUrl"] if pages else ""
            if not ws_url:
                time.sleep(0.1)
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e["method"] == method for e in self.events):
            if time.monotonic() > deadline:
                raise AssertionError(f"no {method} within {timeout_s} s")
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)

    def js(self, expr: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in res:
            raise AssertionError(f"{expr}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:400])
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(json.dumps(p.get("args", []))[:400])
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", "")[:400])
        return out

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    exe = _chromium()
    prof = tmp_path / "chromium-profile"
    prof.mkdir()
    b = Browser(exe, prof)
    try:
        b.call("Runtime.enable")
        b.call("Log.enable")
        b.call("Page.enable")
        yield b
    finally:
        b.close()


def _load(b: Browser, html: Path) -> None:
    b.call("Page.navigate", url=html.resolve().as_uri())
    b.wait_event("Page.loadEventFired")


def _png_colours(data: bytes) -> tuple[int, int, float]:
    """Width, distinct colours (at half size), share of the most common colour."""
    from PIL import Image

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = Image.open(io.BytesIO(data)).convert("RGB")
    small = img.resize((img.width // 2, img.height // 2))
    colours = small.getcolors(maxcolors=1 << 22) or []
    top = max(c for c, _ in colours) / (small.width * small.height)
    return img.width, len(colours), top


def test_demo_report_renders_without_errors(browser: Browser, tmp_path: Path) -> None:
    out = tmp_path / "report"
    write_report([DEMO], out, html=True, md=False)
    _load(browser, out / "report.html")
    assert browser.errors() == []
    # plots and tables are there and laid out (non-zero size)
    svgs = browser.js(
        "Array.from(document.querySelectorAll('svg.plot')).map(s => s.getBoundingClientRect().height)"
    )
    assert len(svgs) == 4 and all(h > 100 for h in svgs)
    rows = browser.js("document.querySelectorAll('#results-table-0 tbody tr').length")
    assert rows == 2
    assert browser.js("document.querySelectorAll('table.plan').length") >= 2
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        width=1280,
        height=4000,
        deviceScaleFactor=1,
        mobile=False,
    )
    shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
    width, colours, top = _png_colours(shot)
    assert width == 1280
    assert colours > 200, "screenshot looks blank"
    assert top < 0.97, "screenshot is almost one colour"
    keep = os.environ.get("MYACCEL_REPORT_SCREENSHOT")
    if keep:
        Path(keep).write_bytes(shot)
    # sorting works: click "gain %" twice (descending): the largest gain first
    browser.js("document.querySelector('#results-table-0 th[data-col=gain]').click()")
    browser.js("document.querySelector('#results-table-0 th[data-col=gain]').click()")
    first = browser.js(
        "document.querySelector('#results-table-0 tbody tr td[data-col=workload]').textContent"
    )
    assert first == "oltp_read_only"
    browser.js("document.querySelector('#results-table-0 th[data-col=gain]').click()")  # back
    assert browser.errors() == []


def test_flame_graph_zoom_works_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    from myaccel.profile.folded import parse_folded, summarize
    from myaccel.profile.records import Recording, build_profile, save_profile

    src = Path(__file__).parents[1] / "fixtures" / "profiles"
    text = (src / "seed004-spin-kunpeng920.folded").read_text()
    (tmp_path / "stacks.folded").write_text(text)
    doc = json.loads((src / "seed004-spin-kunpeng920.capture.json").read_text())
    p = build_profile(
        Recording(**{**doc["recording"], "folded_path": "stacks.folded"}),
        stacks=summarize(parse_folded(text)),
    )
    save_profile(p, tmp_path / "profile.json")
    write_report([tmp_path / "profile.json"], tmp_path, html=True, md=False)
    _load(browser, tmp_path / "report.html")
    assert browser.errors() == []
    n = browser.js("document.querySelectorAll('svg.flame g.fg').length")
    assert n > 20
    # click the widest frame narrower than half the graph: zoomed, it fills the width
    width = browser.js(
        """(() => {
        const gs = Array.from(document.querySelectorAll('svg.flame g.fg'))
            .filter(g => parseFloat(g.dataset.w) < 0.5);
        gs.sort((a, b) => b.dataset.w - a.dataset.w);
        const g = gs[0];
        g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        return parseFloat(g.querySelector('rect').getAttribute('width'));
        })()"""
    )
    assert width > 1190
    hidden = browser.js(
        "Array.from(document.querySelectorAll('svg.flame g.fg')).filter(g => g.style.display === 'none').length"
    )
    assert hidden > 0
    browser.js("document.querySelector('button.flame-reset').click()")
    assert browser.js(
        "Array.from(document.querySelectorAll('svg.flame g.fg')).every(g => g.style.display !== 'none')"
    )
    assert browser.errors() == []
