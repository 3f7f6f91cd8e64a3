-- A bucket on its way to another database (store.split.move): a freeze fences that one too.
ALTER TABLE bucket_map ADD COLUMN moving_to text;
