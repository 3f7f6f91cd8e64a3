-- A lease on an erasure record, so that one eraser at a time carries it out (two at once
-- did every step twice: harmless to the data, but the record's counts came out doubled).
-- ``claim_erasures`` sets both columns; ``advance_erasure`` and ``renew_erasure`` write
-- only while ``held_by`` is still theirs; a record whose ``held_until`` has passed (its
-- eraser died) is anyone's. The last step clears both. Numbered after the highest.
ALTER TABLE erasures ADD COLUMN held_by TEXT;
ALTER TABLE erasures ADD COLUMN held_until double precision;
