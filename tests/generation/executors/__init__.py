"""Tests of generation/executors/, in files named after its modules where one module is tested."""
