"""What the kit does with judgment shards once generation/ has made them, and the command line over both:
the release (release/: build, validate, publish), analysis of judgments and releases (analysis/), a retriever
trained on a release (training/), the stand-ins and synthetic data that tests and benchmarks run on (standins/),
and the `researchy-subq` CLI (cli/, with pasteable.py for the commands it prints)."""
