-- Credentials get a scope (game | admin | ops: invariant 5, only game-server keys submit)
-- and may be revoked. A key that was an admin key stays one; every other key is a game
-- server's. The admin column stays, written in step with scope, for processes not yet
-- upgraded.
ALTER TABLE api_keys ADD COLUMN scope text NOT NULL DEFAULT 'game'
    CHECK (scope IN ('game', 'admin', 'ops'));
UPDATE api_keys SET scope = 'admin' WHERE admin;
ALTER TABLE api_keys ADD COLUMN revoked_at double precision;
