"""Every page of the documentation as a browser shows it: no page wider than the window, no broken image.

The site is built with Sphinx (the ``[docs]`` extra) into a temporary folder, then every HTML page
(the API's highlighted sources under ``_modules/`` included) is opened in headless Chromium at 1280
and at 390 CSS pixels wide.  A page fails when the document is wider than the window (its
``scrollWidth`` exceeds the window's width: text cut off, a scroll bar for the whole page) or when an
image did not load (``naturalWidth`` 0).  The failure names the widest elements.

Chromium is found on ``PATH`` (or ``MPICOLL_CHROMIUM``) and, on a fresh Debian machine where the
test runs as root, installed with ``apt-get install chromium`` (see ``browser.find_chromium``);
where none can be installed the test is skipped and says why.

Run alone (a few minutes, most of it the Sphinx build)::

    .venv/bin/python -m pytest tests/unit/test_pages_in_browser.py -q

``python tests/unit/test_pages_in_browser.py BUILD_DIR OUT_DIR`` measures an existing build and writes
a screenshot of every page at both widths into OUT_DIR (how the pages were looked at by eye).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from browser import Browser, find_chromium

ROOT = pathlib.Path(__file__).resolve().parents[2]
WIDTHS = ((1280, 900), (390, 844))   # a laptop's window; a phone's
BUILD_TIMEOUT = 1200                 # seconds for the Sphinx build (two minutes on the shared 2-core machine)

# The measurement, in the page: how wide the document is against the window, the elements that stick
# out furthest on the right (the culprits, for the message), and the images that failed to load.
MEASURE = r"""(() => {
  const doc = document.documentElement, win = doc.clientWidth;
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > win + 1 && getComputedStyle(el).position !== 'fixed') {
      let inside = false;   // inside a box that scrolls or hides its overflow: not the page's width
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        const ox = getComputedStyle(p).overflowX;
        if (ox === 'auto' || ox === 'scroll' || ox === 'hidden' || ox === 'clip') { inside = true; break; }
      }
      if (!inside) out.push(el);
    }
  }
  // name the innermost ones (a column is wide because of what is in it)
  const leaves = out.filter(el => !out.some(o => o !== el && el.contains(o)))
    .map(el => [Math.round(el.getBoundingClientRect().right), el.tagName.toLowerCase() +
                (el.getAttribute("class") ? "." + el.getAttribute("class").trim().split(/\s+/).join('.') : ''),
                (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60)]);
  leaves.sort((a, b) => b[0] - a[0]);
  const broken = Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)
                      .map(i => i.getAttribute('src'));
  return {scroll: doc.scrollWidth, window: win, culprits: leaves.slice(0, 3), broken: broken};
})()"""


def pages(html: pathlib.Path) -> list[pathlib.Path]:
    """Every HTML page of a built site (the copied ``_sources`` and static files have none)."""
    return sorted(p for p in html.rglob("*.html") if "_static" not in p.parts)


def measure(browser: Browser, page: pathlib.Path, width: int, height: int, shot: str | None = None) -> dict:
    """Open one page at one window size; the measurement of :data:`MEASURE` (and a screenshot to ``shot``)."""
    browser.resize(width, height)
    browser.load(page.as_uri())
    result = browser.evaluate(MEASURE)
    if shot:
        browser.screenshot(shot)
    return result


def problems(site: pathlib.Path, executable: str, shots: pathlib.Path | None = None) -> list[str]:
    """One line per page and width that is wider than its window or has a broken image."""
    found = []
    with Browser(executable) as browser:
        for page in pages(site):
            rel = page.relative_to(site).as_posix()
            for width, height in WIDTHS:
                shot = str(shots / f"{rel.replace('/', '__')[:-5]}-{width}.png") if shots else None
                m = measure(browser, page, width, height, shot)
                if m["scroll"] > m["window"]:
                    found.append(f"{rel} at {width} px: the page is {m['scroll']} px wide, the window "
                                 f"{m['window']} px; sticking out: {m['culprits']}")
                if m["broken"]:
                    found.append(f"{rel} at {width} px: images that did not load: {m['broken']}")
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    """The documentation built into a temporary folder (warnings are errors, as in ``tox -e docs``)."""
    for module in ("sphinx", "myst_parser", "furo", "matplotlib"):
        pytest.importorskip(module, reason=f"the docs need {module}: pip install -e \".[docs]\"")
    out = tmp_path_factory.mktemp("docs") / "html"
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "docs", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert proc.returncode == 0, f"the docs do not build:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


def test_every_page_fits_the_window_and_every_image_loads(site):
    executable, how = find_chromium()
    if executable is None:
        pytest.skip(f"no headless Chromium to render the pages in: {how}")
    found = pages(site)
    assert len(found) >= 50, f"only {len(found)} pages were built"
    bad = problems(site, executable)
    assert bad == [], f"{len(bad)} page renderings do not fit (Chromium {how}):\n" + "\n".join(bad)


def test_the_measurement_catches_a_page_too_wide_and_a_broken_image(tmp_path):
    """The check itself: a page with a 2000-pixel table and a missing image fails both ways."""
    executable, how = find_chromium()
    if executable is None:
        pytest.skip(f"no headless Chromium to render the pages in: {how}")
    line = "a long line of code " * 40
    (tmp_path / "wide.html").write_text(f"<!DOCTYPE html><html><body><pre>{line}</pre>"
                                        "<img src='missing.png'></body></html>")
    (tmp_path / "fits.html").write_text(f"<!DOCTYPE html><html><body><pre style='overflow-x:auto'>{line}</pre>"
                                        "<p>short</p></body></html>")
    bad = problems(tmp_path, executable)
    assert sum("wide.html" in b and "px wide" in b for b in bad) == 2, bad
    assert sum("wide.html" in b and "missing.png" in b for b in bad) == 2, bad
    assert not any("fits.html" in b for b in bad), bad


if __name__ == "__main__":   # python tests/unit/test_pages_in_browser.py BUILD_DIR OUT_DIR: measure and screenshot
    exe, how = find_chromium()
    if exe is None:
        sys.exit(f"no chromium: {how}")
    shots_dir = pathlib.Path(sys.argv[2])
    shots_dir.mkdir(parents=True, exist_ok=True)
    report = problems(pathlib.Path(sys.argv[1]), exe, shots_dir)
    print("\n".join(report) or "every page fits at both widths; every image loads")
    print(f"{len(report)} problems")
