-- Whether any match has raised a sum tally yet: until one has, reached_at is the earliest
-- match (see domain.boards.fold), which keeps the tie-breaker independent of arrival order.
ALTER TABLE tallies ADD COLUMN scored INTEGER NOT NULL DEFAULT 1;
