-- channel: the LISTEN/NOTIFY channel of the schema the tables live in (the first schema of the
-- search_path that has pgqueue's functions), on which pgqueue_notify sends: both functions carry
-- the channel their migration computed ('pgqueue.' and the schema, cut to the 63 bytes a channel
-- may have), so listener and notifiers agree by construction. Reads no table.
SELECT pgqueue_channel()
