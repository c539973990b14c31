"""A page in a real headless Chromium, driven over the DevTools protocol (aiohttp's websocket
client): its console errors, every request that is not file: or data:, where its charts and
sections are, and a full-page screenshot."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

WIDTH = 1200
DEADLINE = 20.0  # seconds for the whole visit


@dataclass
class Seen:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    boxes: dict[str, dict] = field(default_factory=dict)  # chart -> {x, y, width, height} in page pixels
    headings: dict[str, float] = field(default_factory=dict)  # a section's id (h2#memory) -> its top, in page pixels
    # every piece of text on the page as drawn: {"where": a chart's name, "phase" (a phase's own graph)
    # or "page", "text", "px": its font size on screen (an SVG's scale included), "fill": its colour,
    # "shown": laid out (not inside something hidden), "y": its top in page pixels}
    texts: list[dict] = field(default_factory=list)
    bytes: int = 0
    png: bytes = b""


class Chromium:
    """One headless Chromium for a module's tests: each page opens in a tab of its own (a new
    DevTools target, closed after), so a test never sees another's page; starting the browser
    once saves seconds a page. `profile`: its user data directory."""

    def __init__(self, executable: str, profile: Path):
        self.proc = subprocess.Popen([executable, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                                      "--hide-scrollbars", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)  # in our session: a run in this process (virtual.harnessc)
        # ends the children of other sessions it finds under it, as orphans its commands left
        try:
            self.url = _devtools_url(self.proc)
        except BaseException:
            self.close()
            raise
        # what it says later is read and dropped: a full pipe would stop the browser
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory):
    """The module's headless Chromium (skipped where it is not installed)."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    browser = Chromium(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


def load_page(browser: Chromium, page: Path, fragment: str = "") -> Seen:
    """The page as Chromium shows it, in a new tab (`fragment`: opened at #fragment, as a
    followed link)."""
    assert browser.proc.poll() is None, f"chromium exited ({browser.proc.returncode})"
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    return asyncio.run(asyncio.wait_for(_visit(browser.url, url), DEADLINE))


def _devtools_url(proc: subprocess.Popen) -> str:
    """The browser's websocket address, from the line Chromium prints as it starts."""
    for _ in range(200):
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"DevTools listening on (ws://\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError("chromium did not print its DevTools address")


async def _visit(browser_url: str, page_url: str) -> Seen:
    import aiohttp

    seen = Seen()
    async with aiohttp.ClientSession() as http, http.ws_connect(browser_url, max_msg_size=0) as ws:
        cdp = _Session(ws, seen)
        reader = asyncio.create_task(cdp.read())
        target = (await cdp.call("Target.createTarget", url="about:blank"))["targetId"]
        cdp.session = (await cdp.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            await cdp.call(f"{domain}.enable")
        await cdp.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
        await cdp.call("Page.navigate", url=page_url)
        await cdp.loaded.wait()
        height = await cdp.evaluate("document.documentElement.scrollHeight")
        await cdp.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=min(int(height), 12000),
                       deviceScaleFactor=1, mobile=False)
        seen.boxes = await cdp.evaluate(
            "Object.fromEntries(['plan', 'timeline', 'spending'].filter(n => document.querySelector('.chart-' + n))"
            ".map(n => { const r = document.querySelector('.chart-' + n).getBoundingClientRect();"
            " return [n, {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}]; }))")
        seen.headings = await cdp.evaluate(
            "Object.fromEntries([...document.querySelectorAll('h2[id]')].map(h => [h.id, h.getBoundingClientRect().y + scrollY]))")
        seen.texts = await cdp.evaluate(TEXTS)
        shot = await cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        seen.png = base64.b64decode(shot["data"])
        cdp.session = None
        await cdp.call("Target.closeTarget", targetId=target)
        reader.cancel()
    return seen


# Each SVG <text> (its size times the SVG's scale on screen) and each HTML element with text of
# its own, in the page as laid out; hidden ones (a phase's graph until its link is followed) too.
TEXTS = """(() => {
  const out = [];
  const top = el => el.getBoundingClientRect().y + scrollY;
  const where = el => { const c = el.closest('[class*="chart-"], .phase-tasks');
    return c ? (c.classList.contains('phase-tasks') ? 'phase' : [...c.classList].find(k => k.startsWith('chart-')).slice(6)) : 'page'; };
  for (const el of document.querySelectorAll('svg text')) {
    const text = el.textContent.trim();
    if (!text) continue;
    const ctm = el.getScreenCTM();
    const scale = ctm ? Math.hypot(ctm.a, ctm.b) : 1;
    const style = getComputedStyle(el);
    out.push({where: where(el), text, px: parseFloat(style.fontSize) * scale, fill: style.fill,
              shown: el.getClientRects().length > 0, y: top(el)});
  }
  for (const el of document.querySelectorAll('body *:not(svg):not(svg *)')) {
    const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
    if (own) out.push({where: where(el), text: own.slice(0, 80), px: parseFloat(getComputedStyle(el).fontSize),
                       fill: getComputedStyle(el).color, shown: el.getClientRects().length > 0, y: top(el)});
  }
  return out;
})()"""


class _Session:
    """Calls with ids over one websocket; events noted in `seen` as they arrive."""

    def __init__(self, ws, seen: Seen):
        self.ws, self.seen, self.session = ws, seen, None
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future] = {}
        self.loaded = asyncio.Event()

    async def call(self, method: str, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        future = self.waiting[self.next_id] = asyncio.get_running_loop().create_future()
        await self.ws.send_str(json.dumps(message))
        return await future

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"]["value"]

    async def read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                future = self.waiting.pop(data["id"])
                if "error" in data:
                    future.set_exception(AssertionError(f"{data['error']}"))
                else:
                    future.set_result(data.get("result", {}))
                continue
            self.note(data.get("method"), data.get("params") or {})

    def note(self, method: str | None, params: dict) -> None:
        if method == "Page.loadEventFired":
            self.loaded.set()
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.seen.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            self.seen.console_errors.append(str(params["exceptionDetails"].get("text")))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.seen.console_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(("file:", "data:")):
                self.seen.requests.append(url)


def colours_in(png: bytes, box: dict) -> dict[str, int]:
    """Pixels of each colour (#rrggbb) inside `box` of the screenshot."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    crop = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"])))
    return {"#%02x%02x%02x" % rgb: n for n, rgb in crop.getcolors(maxcolors=1 << 24)}


def save_small(png: bytes, path: Path, height: int = 1500) -> None:
    """The top of the screenshot as a small palette PNG (the README's picture)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    image = image.crop((0, 0, image.width, min(height, image.height)))
    image.quantize(colors=64).save(path, optimize=True)
