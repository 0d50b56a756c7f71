-- channel: the LISTEN/NOTIFY channel of the schema the tables live in (the first schema of the
-- search_path). Every statement that notifies computes the same expression server-side. The cast
-- to name cuts it to the 63 bytes a channel may have without splitting a character (left(…, 63)
-- counts characters, and a longer channel makes pg_notify fail); names that fit are unchanged.
SELECT ('pgqueue.' || current_schema())::name::text
