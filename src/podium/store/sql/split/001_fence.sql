-- On every database of a store split by player (store.split). A window is frozen in two
-- steps there: each database first fences it (a row here with fence = true, which every
-- record on that database already refuses to fold into, as it would a frozen window), then
-- the home database decides (fence = false on the home's row, with the final standings).
ALTER TABLE frozen_windows ADD COLUMN fence boolean NOT NULL DEFAULT false;
