"""Real-browser tests of the dashboard (headless Chromium through Playwright)."""
