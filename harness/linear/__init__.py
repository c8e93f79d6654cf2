"""The linear suite's cases and goldens, and the scheme x path support matrix."""
