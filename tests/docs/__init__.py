"""The documentation: links, paths, generated reference pages, and the figures the docs show."""
