"""The report in a real headless Chromium: charts load, planted markup does not run."""

from __future__ import annotations

import html as htmlmod
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from crossover.report import load_sweep, write_report

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=10000",
]

# Appended by the test only: reports results into the DOM for --dump-dom.
PROBE = """<script>
window.addEventListener('load', function () {
  var out = {
    images: Array.from(document.images).map(function (i) {
      return {alt: i.alt, complete: i.complete, width: i.naturalWidth};
    }),
    pwned: document.documentElement.getAttribute('data-pwned'),
    scripts: document.scripts.length
  };
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None and Path("/usr/bin/chromium").exists():
        path = "/usr/bin/chromium"
    if path is None:
        pytest.fail("chromium is missing: apt-get install -y chromium (make test installs it)")
    return path


def _dump_dom(page: Path, profile: Path) -> str:
    cmd = [_chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.browser
def test_report_renders_in_chromium_and_planted_script_does_not_run(
    sweep_dir: Path, tmp_path: Path
) -> None:
    # a decision beside the sweep, its target and reason planted with markup too
    planted = "<script>document.documentElement.setAttribute('data-pwned','1')</script>"
    decision = {
        "schema": "crossover.decision/1",
        "question": {"kind": "crossover", "targets": ["a", planted], "metrics": ["ttft_ms.p50"]},
        "findings": [{"text": planted}],
        "not_measured": [{"target": planted, "levels": [64], "reason": planted}],
    }
    (sweep_dir / "decision.json").write_text(json.dumps(decision))
    report = write_report(sweep_dir, load_sweep(sweep_dir))
    text = report.read_text()
    assert 'id="decision"' in text

    # 1. the report as shipped (its CSP allows no script at all)
    dom = _dump_dom(report, tmp_path / "profile1")
    html_tag = re.search(r"<html[^>]*>", dom)
    assert html_tag
    assert "data-pwned" not in html_tag.group(0)
    assert dom.count("data:image/png;base64,") == 4
    assert "&lt;script&gt;document.documentElement" in dom  # shown as text

    # 2. without the CSP, so escaping alone is what stops the planted markup;
    #    a probe script of the test's own reports what the page saw
    probed = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
    assert probed != text
    probed = probed.replace("</body>", PROBE + "</body>")
    page = tmp_path / "probed.html"
    page.write_text(probed)
    dom = _dump_dom(page, tmp_path / "profile2")
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert match, dom[-3000:]
    result = json.loads(htmlmod.unescape(match.group(1)))
    assert result["pwned"] is None
    assert result["scripts"] == 1  # the probe, nothing planted
    assert len(result["images"]) == 4
    for img in result["images"]:
        assert img["complete"], img
        assert img["width"] > 0, img
