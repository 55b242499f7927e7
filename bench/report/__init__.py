"""Human-readable reports of a run (Markdown today; plots and HTML arrive with the
matrix work)."""
