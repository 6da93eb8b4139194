"""The kit as a hostile user meets it: bad input, kills, links, refused options (docs/reliability.md)."""
