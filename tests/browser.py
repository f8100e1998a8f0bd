"""landcover view in a real headless browser: the server as a subprocess, a page in Chromium.

Chromium is Debian's (``scripts/install-chromium.sh``), driven by Playwright; Playwright's own
browser download is never used. Without Chromium the tests skip, and fail under
``scripts/test.sh`` (``LANDCOVER_REQUIRE_CHROMIUM=1``), as CI installs it.
"""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from PIL import Image

from conftest import start_cli

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
VIEWPORT = {"width": 1000, "height": 700}
MAP_WIDTH = VIEWPORT["width"] - 340  # the panel (viewer.css) takes the rest


def chromium() -> Iterator:
    """Headless Chromium under Playwright (a generator for a fixture); a skip without it."""
    if not CHROMIUM.is_file():
        reason = f"no Chromium at {CHROMIUM}: bash scripts/install-chromium.sh installs it"
        if os.environ.get("LANDCOVER_REQUIRE_CHROMIUM") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield browser
        browser.close()


class Viewer:
    """``landcover view DIR --port 0 --no-browser`` running, and its page's address."""

    def __init__(self, folder: Path, env: dict[str, str] | None = None) -> None:
        self.proc = start_cli("view", str(folder), "--port", "0", "--no-browser", env=env)
        line = self.proc.stdout.readline()
        assert "serving" in line, line + self.proc.stderr.read()
        self.url = line.split(" at ")[1].split()[0]
        self.netloc = urlparse(self.url).netloc

    def stop(self) -> str:
        """Ctrl-C, as a user stops it: exit 0."""
        os.killpg(self.proc.pid, signal.SIGINT)
        out, err = self.proc.communicate(timeout=20)
        assert self.proc.returncode == 0, err
        return out + err


def serve(folder: Path) -> Iterator[Viewer]:
    """A viewer of ``folder`` for a fixture, stopped after."""
    viewer = Viewer(folder)
    try:
        yield viewer
    finally:
        if viewer.proc.poll() is None:
            viewer.stop()


class Page:
    """A page of the viewer, with every request it made and every one refused.

    Every request goes through a route: those to the viewer's server go on, any other is
    refused and recorded (so a page that reached beyond loopback fails its test).
    """

    def __init__(self, browser, viewer: Viewer) -> None:
        self.context = browser.new_context(viewport=VIEWPORT)
        self.requests: list[str] = []
        self.refused: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self.route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.netloc = viewer.netloc
        self.page.goto(viewer.url)
        self.page.wait_for_function("window.landcoverView && window.landcoverView.ready")

    def route(self, route) -> None:
        url = route.request.url
        self.requests.append(url)
        if urlparse(url).netloc == self.netloc:
            route.continue_()
        else:
            self.refused.append(url)
            route.abort()

    def settle(self) -> None:
        """Waits until every tile layer on the map has loaded the tiles of the view."""
        self.page.wait_for_function(
            "Object.values(landcoverView.layers).every(l => !landcoverView.map.hasLayer(l)"
            " || !l.isLoading())"
        )
        # faded in: a layer's setOpacity within 200 ms of a tile's load fades that tile in
        # from transparent (Leaflet's GridLayer._updateOpacity, even without fadeAnimation)
        self.page.wait_for_function(
            "[...document.querySelectorAll('img.leaflet-tile')]"
            ".every(i => i.style.opacity === '' || Number(i.style.opacity) === 1)"
        )
        # and painted: every tile image decoded, the old zoom's tiles pruned (Leaflet does so
        # on the next animation frame), two frames drawn
        self.page.evaluate(
            "async () => { await Promise.all([...document.querySelectorAll('img.leaflet-tile')]"
            ".map(i => i.decode().catch(() => null)));"
            " for (let i = 0; i < 3; i++) await new Promise(r => requestAnimationFrame(r)); }"
        )

    def go_to(self, lon: float, lat: float, zoom: int) -> None:
        """Centres the map on a point at a zoom, and waits for its tiles."""
        self.page.evaluate(
            "([lat, lon, zoom]) => landcoverView.map.setView([lat, lon], zoom, {animate: false})",
            [lat, lon, zoom],
        )
        self.settle()

    def screen(self, lons: list[float], lats: list[float]) -> list[tuple[int, int]]:
        """Where points are on the screen (the map's own projection; the map is at 0, 0)."""
        points = self.page.evaluate(
            "(points) => points.map(p => landcoverView.map.latLngToContainerPoint(p))",
            [[lat, lon] for lon, lat in zip(lons, lats, strict=True)],
        )
        return [(round(p["x"]), round(p["y"])) for p in points]

    def screenshot(self) -> np.ndarray:
        """The page as ``(height, width, 3)`` RGB integers."""
        png = self.page.screenshot()
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)

    def close(self) -> None:
        self.context.close()


def on_map(x: int, y: int) -> bool:
    """Whether a screen point is on the map (not under the panel, not off the screen)."""
    return 0 <= x < MAP_WIDTH and 0 <= y < VIEWPORT["height"]
