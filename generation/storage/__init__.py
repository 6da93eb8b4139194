"""Storage: the schema of every table, atomic files, shards and their completion records, spills."""
