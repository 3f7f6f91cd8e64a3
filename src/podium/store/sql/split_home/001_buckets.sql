-- On the home database of a store split by player (store.split): which database each of the
-- 4,096 virtual buckets of players lives on (domain.sharding.bucket_of), by its URL.
CREATE TABLE bucket_map (
    bucket  integer PRIMARY KEY CHECK (bucket >= 0 AND bucket < 4096),
    db      text NOT NULL
);
