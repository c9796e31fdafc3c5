"""citeweave fetcher."""
