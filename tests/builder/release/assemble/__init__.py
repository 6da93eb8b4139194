"""Tests of builder/release/assemble/, in files named after its modules where one module is tested."""
