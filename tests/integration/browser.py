"""Headless Debian chromium driven through chromium-driver (selenium) for the console's tests:
every process it starts carries an env marker and is stopped by PID; a screenshot of each page
visited is saved under build/screenshots/console/ (kept for a person to look at)."""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from deploy import procinfo
from tests.integration.conftest import MarkedProcess, kill_pids, wait_gone

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots" / "console"


def start_console(tmp_path: Path, namesrv: str, *extra: str,
                  env: dict[str, str] | None = None) -> tuple[MarkedProcess, str]:  # fmt: skip
    """`actormq console -n namesrv --port 0 extra...` as a subprocess; (process, base URL)."""
    run = MarkedProcess([sys.executable, "-m", "deploy", "console", "-n", namesrv, "--port", "0",
                         *extra], tmp_path / f"console-{uuid.uuid4().hex[:6]}", os.getcwd(),
                        env)  # fmt: skip
    try:
        run.wait_for("console listening on http://127.0.0.1:", 60.0)
    except BaseException:
        run.stop()
        raise
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", run.out_path.read_text())
    assert found is not None
    return run, f"http://127.0.0.1:{found.group(1)}"


class Browser:
    """One headless chromium; `open(path)` loads a console page and saves its screenshot."""

    def __init__(self, base: str, profile: Path) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.base = base
        self.marker = uuid.uuid4().hex
        opts = webdriver.ChromeOptions()
        opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1400,1000", f"--user-data-dir={profile}",
                    "--no-first-run", "--disable-extensions", "--disable-background-networking"):
            opts.add_argument(arg)
        service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver",
                          env=dict(os.environ, ACTORMQ_TEST_MARKER=self.marker),
                          log_output=str(profile.parent / "chromedriver.log"))  # fmt: skip
        self.driver = webdriver.Chrome(options=opts, service=service)
        self.driver.set_page_load_timeout(60)

    def open(self, path: str, shot: str | None = None) -> Any:
        self.driver.get(self.base + path)
        if shot:
            self.screenshot(shot)
        return self.driver

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        out = SCREENSHOTS / f"{name}.png"
        self.driver.save_screenshot(str(out))
        return out

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def text(self, selector: str) -> str:
        return str(self.css(selector).text)

    def _replaced(self, old: Any, timeout_s: float) -> None:
        """Until the page whose root was `old` is gone and the next one has loaded. Chromium
        reports a node of a page being torn down as "not in the document" (a WebDriverException
        that is not a stale element): that too means the page was replaced."""
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        def gone(driver: Any) -> bool:
            try:
                old.is_enabled()  # any call on the old root: it fails once that page is gone
            except WebDriverException:
                return bool(driver.execute_script("return document.readyState") == "complete")
            return False

        WebDriverWait(self.driver, timeout_s).until(gone)

    def follow(self, selector: str) -> None:
        """Click the link `selector` and wait until its page replaced this one."""
        from selenium.webdriver.common.by import By

        old = self.driver.find_element(By.TAG_NAME, "html")
        self.css(selector).click()
        self._replaced(old, 60.0)

    def submit(self, form_id: str, fields: dict[str, str] | None = None,
               accept: bool = False) -> str:  # fmt: skip
        """Fill and submit a form (accepting its confirm dialog); the flashed message."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        form = self.css(f"form#{form_id}")
        for name, value in (fields or {}).items():
            box = form.find_element(By.NAME, name)
            if box.tag_name == "select":
                from selenium.webdriver.support.ui import Select

                Select(box).select_by_visible_text(value)
            else:
                box.clear()
                box.send_keys(value)
        old = self.driver.find_element(By.TAG_NAME, "html")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        if accept:
            WebDriverWait(self.driver, 10).until(ec.alert_is_present()).accept()
        self._replaced(old, 120.0)
        flashes = self.all("p.flash")
        return " | ".join(str(f.text) for f in flashes)

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            pids = procinfo.pids_with_env(f"ACTORMQ_TEST_MARKER={self.marker}")
            kill_pids(wait_gone(pids, 10.0))
