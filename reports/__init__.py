"""Presentation: result.json, report.md, bandwidth.png, baseline comparison. Never imports torch."""
