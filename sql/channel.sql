-- channel: the LISTEN/NOTIFY channel of the schema the tables live in (the first schema of the
-- search_path). Every statement that notifies computes the same expression server-side.
SELECT left('pgqueue.' || current_schema(), 63)
