"""Release assembly: Parquet configs, the dataset card, validation, publishing, the `datasets` builder."""
