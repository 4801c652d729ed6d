"""Reporting: result tables (CSV, Markdown, LaTeX) of a study, and the figures drawn from them."""
