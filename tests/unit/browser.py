"""A headless Chromium driven over the DevTools protocol on a pipe: enough to measure rendered pages.

No package beyond the standard library: Chromium is started with ``--remote-debugging-pipe`` and
reads protocol messages (JSON, each ended by a NUL byte) on its file descriptor 3 and writes its
answers and events on descriptor 4, the way Playwright and Puppeteer talk to it.

:func:`find_chromium` finds the browser and, when none is installed and this process runs as root on
a Debian-like system, installs Debian's ``chromium`` with ``apt-get`` (CI starts on a fresh machine).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium(install: bool = True) -> tuple[str | None, str]:
    """The path of a Chromium executable and how it was found, or None and why there is none.

    Parameters
    ----------
    install : bool
        Install Debian's ``chromium`` with ``apt-get`` when none is found and this process is root.

    Returns
    -------
    tuple of (str or None, str)
        The executable (``MPICOLL_CHROMIUM`` first, then the usual names on ``PATH``) and a
        sentence for the test's report.
    """
    given = os.environ.get("MPICOLL_CHROMIUM")
    if given:
        return (given, "MPICOLL_CHROMIUM") if shutil.which(given) else (None, f"MPICOLL_CHROMIUM={given} not found")
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path, f"found on PATH: {path}"
    if not install:
        return None, "no chromium on PATH"
    if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "no chromium on PATH, and apt-get cannot install one here (not root or no apt-get)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log = []
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        log.append(proc.stdout[-500:] + proc.stderr[-500:])
        if proc.returncode != 0:
            return None, f"`{' '.join(cmd)}` failed: {log[-1]}"
    path = shutil.which("chromium")
    return (path, "installed with apt-get") if path else (None, "apt-get ran but installed no chromium")


class Browser:
    """One headless Chromium with one tab, measured through the DevTools protocol.

    Parameters
    ----------
    executable : str
        The Chromium to start.
    timeout : float
        Seconds to wait for any one answer or page load.
    """

    def __init__(self, executable: str, timeout: float = 60.0):
        self.timeout = timeout
        ours_r, theirs_w = os.pipe()     # what Chromium writes (its fd 4), we read
        theirs_r, ours_w = os.pipe()     # what we write, Chromium reads (its fd 3)

        def wire():   # in the child: the two pipe ends at descriptors 3 and 4 (moved up first, not to clobber)
            high_r = fcntl.fcntl(theirs_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(theirs_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._profile = tempfile.mkdtemp(prefix="mpicoll-chromium-")
        args = [executable, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--hide-scrollbars", f"--user-data-dir={self._profile}", "about:blank"]
        # close_fds runs after preexec_fn in the child: 3 and 4 must be kept by name
        self.proc = subprocess.Popen(args, pass_fds=(3, 4, theirs_r, theirs_w), preexec_fn=wire,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(theirs_r)
        os.close(theirs_w)
        self._in = os.fdopen(ours_r, "rb", buffering=0)
        self._out = os.fdopen(ours_w, "wb", buffering=0)
        self._buf = b""
        self._id = 0
        self._events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def _read(self) -> dict:
        while b"\0" not in self._buf:
            chunk = self._in.read(1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed its pipe (exit status {self.proc.poll()})")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, **params) -> dict:
        """Send one protocol command and return its result (events that arrive meanwhile are kept)."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self._out.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)
        raise TimeoutError(f"{method}: no answer in {self.timeout} s")

    def _wait_event(self, name: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for k, ev in enumerate(self._events):
                if ev.get("method") == name:
                    del self._events[: k + 1]
                    return
            self._events.append(self._read())
        raise TimeoutError(f"no {name} in {self.timeout} s")

    def resize(self, width: int, height: int) -> None:
        """Make the tab's window ``width`` x ``height`` CSS pixels (a desktop window, not a phone's zoom)."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def load(self, url: str) -> None:
        """Open ``url`` and return once its load event fired (images included)."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self._wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the open page (JSON-serialisable values)."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: str) -> None:
        """Save what the window shows as a PNG."""
        import base64  # noqa: PLC0415

        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        """End the browser (Browser.close, then the process if it lingers)."""
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 - the pipe may already be gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._in.close()
        self._out.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
