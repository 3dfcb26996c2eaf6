-- Scribe schema for PostgreSQL, version 27: a file path of any length is stored, as on
-- SQLite: the two keys that held a path (`files` (session_id, path, version) and
-- `import_files` (source, path)) index a SHA-256 of the path instead of the path.
--
-- A b-tree entry holds at most ~2,704 bytes after compression, and PostgreSQL refuses a
-- longer one with a raw error (SQLSTATE 54000, "index row size … exceeds btree version 4
-- maximum"). A path is an identity an agent or an importer gives, not a name Scribe
-- chooses: a file an agent changed (Linux allows 4,095 bytes) or a history file an
-- importer read, looked up again by that very path. A length rule would refuse a store
-- SQLite holds (`scribe db copy` failed midway on such a path, an import with the raw
-- message), so instead the keys hold 32 bytes per path whatever its length: uniqueness is
-- that of the digest (a collision of SHA-256 is not a case to handle), and every lookup by
-- path names `scribe_text_key(path)` (sql/queries/postgres/files.sql, import.sql), so it
-- walks the index to the exact entry and then compares the path itself.
--
-- convert_to is STABLE (an encoding conversion in general); from the database's own
-- encoding to UTF-8 it depends on nothing that can change, so the wrapper is IMMUTABLE,
-- as an index expression must be. SQLite keeps its keys: it indexes any length.
CREATE FUNCTION scribe_text_key(t TEXT) RETURNS BYTEA
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT sha256(convert_to(t, 'UTF8'))
$$;

ALTER TABLE files DROP CONSTRAINT files_session_id_path_version_key;
CREATE UNIQUE INDEX files_session_path_version
    ON files (session_id, scribe_text_key(path), version);

ALTER TABLE import_files DROP CONSTRAINT import_files_pkey;
CREATE UNIQUE INDEX import_files_source_path ON import_files (source, scribe_text_key(path));
