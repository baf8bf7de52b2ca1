"""The browser for the report's browser test, installed once per test session when missing."""

import pytest

from browser import ensure_chromium


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium (installed with apt-get when missing and we are root), or a skip that says why not."""
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[test]')")
    path, reason = ensure_chromium()
    if path is None:
        pytest.skip(reason)
    return path
