"""The `researchy-subq` command line: thin commands over library functions, wired in `builder.cli.main`."""
