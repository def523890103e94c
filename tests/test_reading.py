"""What a person reads of one run, for a simulated H200 and a simulated MI300X: the answer on the
first line of the terminal and at the top of report.md, a narrow table, notes as sentences, a
glossary of the shapes shown; report.html self-contained (parsed always, rendered in headless
Chromium when it is installed); bandwidth.png with its levels named, one colour per level and no
label over another or outside its panel."""
import base64
import html.parser
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from detect_caches.detector.shape_rules import SHAPE_RULES
from detect_caches.pipeline.api import analyze
from detect_caches.reports.label_place import overlapping_texts, texts_outside
from detect_caches.reports.plot import build_figure

ROOT = Path(__file__).resolve().parents[1]
ANSWER = {  # level, size, bandwidth, latency: "L1 221 KiB per SM, 32.5 TB/s, 17 ns"
    "h200": r"L1 \d+ KiB per SM, [\d.]+ TB/s, \d+ ns \| L2 [\d.]+ MiB, [\d.]+ TB/s( \([\d.]+ tuned\))?, \d+/\d+ ns"
            r" \| HBM [\d.]+ TB/s( \([\d.]+ tuned\))?, \d+ ns",
    "mi300x": r"L1 [\d.]+ KiB per CU, .* \| L2 [\d.]+ MiB per XCD, [\d.]+ TB/s.* \| Infinity Cache \d+ MiB, .*"
              r" \| HBM [\d.]+ TB/s.*, \d+ ns"}


@pytest.fixture(scope="module", params=["h200", "mi300x"])
def run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "run"
    proc = subprocess.run([sys.executable, "-m", "detect_caches", "--simulate", request.param, "--out", str(out),
                           "--quiet", "--accept-incomplete"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    return request.param, out, proc.stdout


def test_the_answer_comes_first(run):
    name, out, stdout = run
    first = stdout.splitlines()[0]
    assert re.fullmatch(ANSWER[name], first), first
    report = (out / "report.md").read_text()
    top = report.splitlines()[:4]
    assert top[0].startswith("# Cache hierarchy of simulated") and f"**{first}**" in top
    # the terminal's table is narrow: no line as wide as the old 12-column one
    assert max(len(line) for line in stdout.splitlines()[1:]) <= 100
    tables = [line for line in report.split("## Device")[0].splitlines() if line.startswith("|")]
    assert tables and max(len(line) for line in tables) <= 130
    assert "| level | size (measured) | documented size | bandwidth | tuned peak | latency | confidence |" in report


def test_the_report_says_which_size_is_measured_and_explains_its_words(run):
    name, out, _ = run
    result = json.loads((out / "report.md").with_name("result.json").read_text())
    report = (out / "report.md").read_text()
    glossary = report.split("## Glossary")[1]
    for term in ("Size (measured)", "Documented size", "Interval", "Repeatability", "Confidence"):
        assert f"**{term}**" in glossary
    shapes = {lv["fall_shape"] for lv in result["levels"] if lv.get("fall_shape")}
    assert shapes and all(f"**Fall: {s}**" in glossary for s in shapes)
    assert all(SHAPE_RULES[s][0] in glossary for s in shapes)
    # notes: one short sentence a bullet, no "per_cu" in the prose
    notes = report.split("## Notes")[1].split("## Warnings")[0]
    bullets = [line for line in notes.splitlines() if line.startswith("- ")]
    assert bullets and all(b.endswith(".") and b[2].isupper() for b in bullets)
    assert "per_cu" not in report.split("## Method")[0]
    for lv in result["levels"]:
        if lv.get("api_bytes") and lv.get("capacity_bytes") and abs(lv["api_bytes"] / lv["capacity_bytes"] - 1) > 0.01:
            assert f"The {lv['name']} measures" in report and "documents" in report


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text, self.images, self.links, self.classes = [], [], [], [], {}
        self._cls = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag in ("link", "script") or (tag == "a" and attrs.get("href", "").startswith("http")):
            self.links.append(tag)
        self._cls = attrs.get("class")

    def handle_data(self, data):
        self.text.append(data)
        if self._cls:
            self.classes.setdefault(self._cls, []).append(data)


def test_report_html_is_one_self_contained_page(run, tmp_path):
    name, out, stdout = run
    page = _Page()
    page.feed((out / "report.html").read_text())
    assert page.classes["answer"][0] == stdout.splitlines()[0]
    assert not page.links                                     # no stylesheet, script or link to fetch
    assert len(page.images) == 1 and page.images[0].startswith("data:image/png;base64,")
    png = base64.b64decode(page.images[0].split(",", 1)[1])
    assert png == (out / "bandwidth.png").read_bytes()
    text = " ".join(page.text)
    for heading in ("Notes", "Details", "Device", "Method", "Glossary"):
        assert heading in text
    result = json.loads((out / "result.json").read_text())
    assert all(lv["name"] in text for lv in result["levels"]) and page.tags.count("table") >= 3


def test_report_html_renders_in_a_browser(run, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no headless Chromium (Debian: apt-get install chromium)")
    _, out, _ = run
    shot = tmp_path / "page.png"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,1600",
                           (out / "report.html").resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    import matplotlib.image
    pixels = matplotlib.image.imread(io.BytesIO(shot.read_bytes()), format="png")
    assert pixels.shape[:2] == (1600, 1200)
    assert pixels[..., :3].std() > 0.05            # text, tables and the plot, not a blank page


def _labels(fig) -> dict:
    """Each panel's labels: text -> colour."""
    return {ax: {t.get_text(): t.get_color() for t in ax.texts} for ax in fig.axes}


def test_bandwidth_plot_names_its_levels_in_one_colour_each(run):
    name, out, _ = run
    r = analyze(out / "measurements.csv", device=out / "result.json")
    fig = build_figure(r.detection, r.device["name"], vendor=r.device["vendor"])
    axes = fig.axes
    assert [ax.get_ylabel() for ax in axes] == ["bandwidth (TB/s)", "bandwidth (TB/s)", "latency (ns)"]
    assert all("e+" not in t.get_text() and "10^" not in t.get_text() for ax in axes for t in ax.get_yticklabels())
    colours: dict = {}
    for ax, labels in _labels(fig).items():
        named = [t for t in labels if t.split()[0] in {lv["name"] for lv in r.levels} or t.startswith("Infinity")]
        assert len(named) >= 2, labels                 # every panel names the levels it shows
        for text in named:
            level = "Infinity Cache" if text.startswith("Infinity") else text.split()[0]
            colours.setdefault(level, set()).add(labels[text])
    assert set(colours) == {lv["name"] for lv in r.levels}
    assert all(len(c) == 1 for c in colours.values()), colours      # one colour per level in every panel
    # each level's size is marked where it is measured: "L1 221 KiB per SM" on the private sweep
    sizes = [t for t in _labels(fig)[axes[0]] if re.search(r"iB( per \w+)?$", t)]
    assert sizes and sizes[0].startswith("L1 ")
    assert overlapping_texts(fig) == [] and texts_outside(fig) == []
    assert fig.texts[1].get_text().startswith("L1 ")                # the answer under the title


def test_one_latency_figure_per_level_everywhere(run):
    """The answer line, the latency steps' note and the latency panel say the same figure for a
    level (a new user read 141/238 ns on the answer line, 143 ns in the note and on the plot for
    the simulated H200's near L2, and HBM 337 ns against 345 ns on the plot)."""
    name, out, stdout = run
    r = analyze(out / "measurements.csv", device=out / "result.json")
    fig = build_figure(r.detection, r.device["name"], vendor=r.device["vendor"])
    chase = [t.strip() for t in _labels(fig)[fig.axes[-1]]]
    report = (out / "report.md").read_text()
    for lv in r.levels:
        if lv.get("latency_ns") is None:
            continue
        steps = lv.get("latency_steps") or []
        near = f"{lv['latency_ns']:.0f} ns"
        assert any(t.startswith(lv["name"]) and t.endswith(near) for t in chase), (lv["name"], near, chase)
        if len(steps) > 1:
            assert steps[0]["latency_ns"] == lv["latency_ns"]
            assert f"sees it in {len(steps)} steps: {near} up to" in report
            far = f"{steps[-1]['latency_ns']:.0f} ns"
            assert any(t.startswith(f"{lv['name']} far") and t.endswith(far) for t in chase), (far, chase)
            assert f"{near[:-3]}/{far}" in stdout.splitlines()[0]


def test_latency_figures_go_to_the_plateau_each_was_read_from():
    """Each level figure labels the nearest plateau of its level and part, one per plateau: a
    shelf's figure does not take the far plateau's label (a review's case: 245 ns labelled 290)."""
    from types import SimpleNamespace as NS
    from detect_caches.grid import DENSE_SLOT_BYTES
    from detect_caches.reports.plot_levels import latency_figures
    plateaus = [NS(bandwidth_gbs=DENSE_SLOT_BYTES / ns) for ns in (20.0, 141.0, 245.0, 340.0, 18.0)]
    l1 = NS(latency_ns=17.3, latency_steps=[])
    l2 = NS(latency_ns=137.3, latency_steps=[{"latency_ns": 137.3}, {"latency_ns": 245.0}, {"latency_ns": 290.0}])
    hbm = NS(latency_ns=333.0, latency_steps=[])
    owners = [(0, ""), (1, "near"), (1, "far"), (2, ""), (0, "")]
    assert latency_figures(plateaus, owners, [l1, l2, hbm]) == [None, 137.3, 245.0, 333.0, 17.3]


@pytest.mark.parametrize("lv,said", [
    ({"latency_ns": 17.3}, "17 ns"),
    ({"latency_ns": 141.0, "latency_steps": [{"latency_ns": 141.0}, {"latency_ns": 238.0}]}, "141/238 ns"),
    # written before the near step took the hit's figure: the same plateau read another way
    ({"latency_ns": 137.27, "latency_steps": [{"latency_ns": 141.09}, {"latency_ns": 250.0}]}, "137/250 ns"),
    # a hit plateau too short to be a step of its own: every step is said
    ({"latency_ns": 100.0, "latency_steps": [{"latency_ns": 141.0}, {"latency_ns": 238.0}]}, "100/141/238 ns"),
])
def test_a_levels_latency_is_said_once_then_its_steps(lv, said):
    from detect_caches.reports.summary import fmt_latency
    assert fmt_latency(lv) == said
