-- The key of the hashes kept of erased ids (``erased``) when [store] erasure_secret is left
-- empty: generated once by the first process that needs it (INSERT OR IGNORE, then read
-- back, so racing processes agree on the first one written) and used from then on. An empty key would make the hashes plain SHA-256, reversible by hashing
-- guessed ids. A store split by player keeps it on its home database only (the other
-- databases ask the home). A configured secret wins over it.
CREATE TABLE IF NOT EXISTS erasure_key (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    secret  TEXT NOT NULL
);
