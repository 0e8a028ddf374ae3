"""``andreas report`` end to end on SQLite and MariaDB: formats, files, empty windows, bad
input, and the HTML page opened in a real headless browser (Debian ``chromium``)."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import shutil
import subprocess

import pytest

from tests.report.conftest import HOUR, NOW, T0, run_cli

WINDOW = ("--since", "2027-01-15T22:00Z", "--until", "2027-01-16T02:00Z")


def test_table_by_job_node_day_week(db_url, world):
    for by in ("job", "node", "day", "week"):
        r = run_cli(db_url, "report", *WINDOW, "--by", by)
        assert r.exit_code == 0, r.output
        assert "TOTAL" in r.output
        assert "energy 1.760 kWh = jobs 1.280 + unattributed 0.480" in r.output, by
    assert world.a in run_cli(db_url, "report", *WINDOW, "--by", "node").output
    assert world.jobs["j1"] in run_cli(db_url, "report", *WINDOW).output


def test_csv_to_a_file_and_json_on_stdout(db_url, world, tmp_path):
    out = tmp_path / "nodes.csv"
    r = run_cli(db_url, "report", *WINDOW, "--by", "node", "--format", "csv", "-o", str(out))
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert sum(float(x["energy_kwh"]) for x in rows) == pytest.approx(1.76)
    assert not list(tmp_path.glob(".*.tmp"))             # atomic: no temporary left
    doc = json.loads(run_cli(db_url, "report", *WINDOW, "--format", "json",
                             "--co2-g-per-kwh", "300").output)
    assert doc["totals"]["co2_kg"] == pytest.approx(1.76 * 1.33 * 0.3)
    assert doc["window"]["since"] == "2027-01-15T22:00:00Z"


def test_co2_from_the_config_file(db_url, world, tmp_path):
    cfg = tmp_path / "andreas.toml"
    cfg.write_text("[report]\ngrid_co2_g_per_kwh = 100\n")
    doc = json.loads(run_cli(db_url, "report", *WINDOW, "--format", "json",
                             env={"ANDREAS_CONFIG": str(cfg)}).output)
    assert doc["prices"]["co2_g_per_kwh"] == 100.0
    cfg.write_text("[report]\ngrid_co2_g_per_kwh = -1\n")
    r = run_cli(db_url, "report", *WINDOW, env={"ANDREAS_CONFIG": str(cfg)})
    assert r.exit_code == 2 and "[report] grid_co2_g_per_kwh must be >= 0" in r.output


def test_validate(db_url, world):
    r = run_cli(db_url, "report", *WINDOW, "--validate")
    assert r.exit_code == 0, r.output
    assert "4 slot(s), 4 compared" in r.output and "+20.0 % overall" in r.output
    doc = json.loads(run_cli(db_url, "report", *WINDOW, "--validate", "--format", "json").output)
    assert doc["summary"]["deviation_pct"] == pytest.approx(20.0)


def test_empty_period_is_a_message_not_an_error(db_url, world, tmp_path):
    out = tmp_path / "empty.html"
    for args in ((), ("--format", "json"), ("--format", "html", "-o", str(out))):
        r = run_cli(db_url, "report", "--since", "2026-06-01", "--until", "2026-06-02", *args)
        assert r.exit_code == 0
        assert r.output == ("no jobs/samples between 2026-06-01 00:00Z and "
                            "2026-06-02 00:00Z\n")
    assert not out.exists()
    r = run_cli(db_url, "report", "--since", "2026-06-01", "--until", "2026-06-02",
                "--validate")
    assert r.exit_code == 0 and r.output.startswith("no decisions between")


@pytest.mark.parametrize("args, message", [
    (("--since", "-1d", "--until", "-2d"), "--since '-1d' (2027-01-15 02:00Z) is not before "
                                           "--until '-2d'"),
    (("--since", "last week"), "--since 'last week': not now, -<n>"),
    (("--until", "2027-02-30"), "--until '2027-02-30': not now"),
    (("--by", "month"), "--by 'month': must be one of job, node, day, week"),
    (("--format", "xml"), "--format 'xml': must be one of table, csv, json, html"),
    (("--format", "html"), "--format html needs --output FILE"),
    (("--co2-g-per-kwh", "-5"), "--co2-g-per-kwh '-5': must be a number >= 0"),
    (("--co2-g-per-kwh", "lots"), "--co2-g-per-kwh 'lots': must be a number >= 0"),
    (("-o", "/nonexistent-dir/x.csv", *WINDOW, "--format", "csv"),
     "--output /nonexistent-dir/x.csv: cannot write"),
])
def test_bad_input_is_one_line_and_exit_2(db_url, world, args, message):
    r = run_cli(db_url, "report", *args)
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("andreas: error: ")
    assert message in r.output


# --------------------------------------------------------------------------- HTML


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed: the HTML report is checked in a real headless "
                "browser; scripts/test.sh installs it (apt-get install -y chromium)",
                pytrace=False)


PROBE = ("<script>addEventListener('load',()=>{document.body.setAttribute('data-images',"
         "[...document.images].map(i=>i.complete&&i.naturalWidth>0?'ok':'broken').join(' '))"
         "})</script>")


@pytest.mark.slow
def test_html_page_opens_in_headless_chromium(db_url, world, tmp_path):
    page = tmp_path / "report.html"
    r = run_cli(db_url, "report", *WINDOW, "--format", "html", "-o", str(page),
                "--co2-g-per-kwh", "250")
    assert r.exit_code == 0, r.output
    text = page.read_text()
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) == 5          # power, energy per job, per day, jobs, slots
    assert all(base64.b64decode(i).startswith(b"\x89PNG\r\n\x1a\n") for i in images)
    assert "<script" not in text     # self-contained and inert
    # A copy with a probe that reports, after load, whether every image decoded.
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", PROBE + "</body>"))
    done = subprocess.run(
        [chromium(), "--headless", "--disable-gpu", "--no-sandbox",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
    dom = done.stdout
    assert 'data-images="' + " ".join(["ok"] * 5) + '"' in dom
    for section in ("summary", "plots", "periods", "nodes", "jobs", "validation"):
        assert f'id="{section}"' in dom, section
    assert dom.count("<table>") == 4
    assert world.jobs["j1"] in dom and world.a in dom
    assert "2027-01-15" in dom and "2027-01-16" in dom


def test_html_escapes_store_strings(db_url, world, tmp_path, store):
    from sqlalchemy import update

    from andreas.store.models import Decision
    with store.session() as s:
        s.execute(update(Decision).where(Decision.t == T0 + 3 * HOUR)
                  .values(trigger="<b>x</b>&"))
    try:
        page = tmp_path / "r.html"
        assert run_cli(db_url, "report", *WINDOW, "--format", "html", "-o", str(page),
                       now=NOW).exit_code == 0
        text = page.read_text()
        assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;&amp;" in text
    finally:
        with store.session() as s:
            s.execute(update(Decision).where(Decision.t == T0 + 3 * HOUR)
                      .values(trigger="period"))


def test_html_plots_a_node_named_like_mathtext_as_text(db_url, world, tmp_path, store):
    """Issue 16: `$…$` in a node name was parsed as matplotlib mathtext and crashed the
    HTML report; names are data."""
    from sqlalchemy import update

    from andreas.store.models import Node
    name = "$x^{$"
    with store.session() as s:
        s.execute(update(Node).where(Node.name == world.a).values(name=name))
    try:
        page = tmp_path / "r.html"
        r = run_cli(db_url, "report", *WINDOW, "--format", "html", "-o", str(page), now=NOW)
        assert r.exit_code == 0, r.output
        assert name in page.read_text() and "data:image/png;base64," in page.read_text()
    finally:
        with store.session() as s:
            s.execute(update(Node).where(Node.name == name).values(name=world.a))
