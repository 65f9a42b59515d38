"""Rendered SVG displays in a real browser: headless Chromium loads it as an image, reports its
size, and draws it onto a canvas whose dark pixels are counted (skipped where no Chromium or no
Graphviz is installed)."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess

import pytest

import amanda
from amanda.viz import to_svg

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "headless_shell")
BROWSER = next((found for name in BROWSERS if (found := shutil.which(name))), None)
needs_browser = pytest.mark.skipif(BROWSER is None or shutil.which("dot") is None,
                                   reason="headless Chromium or Graphviz's dot is not installed")

PAGE = """<html><head><title>pending</title></head><body><canvas id="c" width="{w}" height="{h}"></canvas>
<script>
const img = new Image();
img.onload = () => {{
  const ctx = document.getElementById("c").getContext("2d");
  ctx.fillStyle = "white"; ctx.fillRect(0, 0, {w}, {h}); ctx.drawImage(img, 0, 0);
  const d = ctx.getImageData(0, 0, {w}, {h}).data; let dark = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] < 600) dark++;
  document.title = "shown " + img.naturalWidth + " " + img.naturalHeight + " " + dark;
}};
img.onerror = () => {{ document.title = "error"; }};
img.src = "data:image/svg+xml;base64,{data}";
</script></body></html>"""


def browser_view(svg: str, tmp_path, size: int = 2000) -> str:
    """The title the page sets once the browser has loaded (or failed to load) the SVG."""
    page = tmp_path / "page.html"
    page.write_text(PAGE.format(w=size, h=size, data=base64.b64encode(svg.encode("utf-8")).decode("ascii")))
    out = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r"<title>(.*?)</title>", out.stdout)
    assert found, f"the browser printed no page: {out.stderr[-500:]}"
    return found.group(1)


def skip_connection() -> amanda.Container:
    """The README's skip-connection edit: a chain of three layers with one inner edge tombstoned."""
    layers = [amanda.op("Dense", f"L{i}", ["x"], ["y"], {"units": 64}) for i in (1, 2, 3)]
    body = amanda.chain(*layers, inputs=["image"], outputs=["features"], name="body")
    return (amanda.edit(body).remove_edge("body/L2:y", "body/L3:x").add(amanda.op("Add", "skip", ["a", "b"], ["y"]))
            .connect("body/L1:y", "skip:a").connect("body/L2:y", "skip:b").connect("skip:y", "body/L3:x")
            .build(name="resnet"))


@needs_browser
def test_the_rendered_skip_connection_displays_in_chromium(tmp_path) -> None:
    """Chromium loads the skip-connection SVG as an image with a size and draws visible marks."""
    title = browser_view(to_svg(skip_connection()), tmp_path)
    assert title.startswith("shown "), title
    width, height, dark = map(int, title.split()[1:])
    assert width > 50 and height > 50
    assert dark > 500, "the drawing has boxes, labels and edges, so many dark pixels"


@needs_browser
def test_broken_svg_does_not_display(tmp_path) -> None:
    """The same check reports an error for SVG text the browser cannot display (so it can fail)."""
    svg = to_svg(skip_connection())
    assert browser_view(svg.replace("</svg>", ""), tmp_path) == "error"
