"""The report of every kind of row, opened in headless Chromium: no console error, nothing
fetched, every figure drawn at a size, a screenshot that is not blank, tables that sort."""

import pytest
from browser import FLAGS
from PIL import Image, ImageStat
from report_rows import write_every_kind

from trainspeed.cli import main

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_the_report_renders_in_chromium(chromium, tmp_path, tiny_run, classifier_run):
    from playwright.sync_api import sync_playwright

    page_path = tmp_path / "report.html"
    inputs = [*write_every_kind(tmp_path / "rows"), tiny_run, classifier_run]
    assert main(["report", *map(str, inputs), "--out", str(page_path)]) == 0
    figures_in_page = page_path.read_text().count('<figure class="figure"')
    problems, requests = [], []
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(chromium), headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = context.new_page()
            page.on("console", lambda message: problems.append(f"console {message.type}: {message.text}")
                    if message.type in ("error", "warning") else None)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("request", lambda request: requests.append(request.url))
            page.goto(page_path.as_uri(), wait_until="load")
            sizes = page.eval_on_selector_all(
                "figure.figure", "figures => figures.map(f => { const svg = f.querySelector('svg'); "
                "const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0}; "
                "return [f.id, box.width, box.height, svg ? svg.querySelectorAll('path, use').length : 0]; })")
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)

            header = page.locator("#table-bench th", has_text="samples/s").first
            header.click()
            column = page.eval_on_selector("#table-bench", "(t, h) => Array.from(t.tHead.rows[0].cells)"
                                           ".findIndex(c => c.textContent === 'samples/s')", None)
            cells = page.eval_on_selector_all(
                f"#table-bench tbody tr td:nth-child({column + 1})",
                "cells => cells.map(c => [c.dataset.sort === undefined ? null : parseFloat(c.dataset.sort), c.textContent])")
            sort_state = header.get_attribute("aria-sort")
        finally:
            context.close()

    assert problems == []
    assert requests == [page_path.as_uri()], "the page fetched something besides itself"
    assert len(sizes) == figures_in_page >= 8
    for figure_id, width, height, marks in sizes:
        assert width > 100 and height > 100 and marks > 0, figure_id
    image = Image.open(tmp_path / "report.png").convert("L")
    assert image.height > 2000 and ImageStat.Stat(image).var[0] > 100, "the screenshot is blank"

    assert sort_state == "ascending"
    numbers = [value for value, _ in cells if value is not None]
    assert numbers == sorted(numbers) and len(numbers) >= 3
    statuses = [text for value, text in cells if value is None]
    assert [value for value, _ in cells[-len(statuses):]] == [None] * len(statuses)
    assert {"invalid", "oom", "skipped", "error"} <= set(statuses)
