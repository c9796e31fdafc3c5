"""citeweave retriever."""
