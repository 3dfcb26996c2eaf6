-- Scribe schema for PostgreSQL, version 27: a file path of any length is stored, as on
-- SQLite: the two keys that held a path (`files` (session_id, path, version) and
-- `import_files` (source, path)) index the MD5 of the path instead of the path.
--
-- A b-tree entry holds at most ~2,704 bytes after compression, and PostgreSQL refused a
-- longer one with a raw error (SQLSTATE 54000, "index row size … exceeds btree version 4
-- maximum"). A path is an identity an agent or an importer gives, not a name Scribe
-- chooses: a file an agent changed (Linux allows 4,095 bytes) or a history file an
-- importer read, looked up again by that very path. A length rule would refuse stores
-- SQLite holds (`scribe db copy` failed midway on such a path, an import with the raw
-- message), so the keys hold 32 characters per path whatever its length instead.
--
-- Every lookup by path names `md5(path)` to walk the key to the path's entries and
-- compares the path itself (sql/queries/postgres/files.sql, import.sql), so two paths are
-- never taken for one another: a collision of MD5 (two different paths built to have the
-- same digest, in one session or one importer source) could only make the second path's
-- insert fail as a duplicate key, loudly. MD5 is a built-in IMMUTABLE function; a
-- SHA-256 of the path needs a wrapper (convert_to, which sha256 needs, is STABLE) that
-- PostgreSQL cannot inline, and that doubled the cost of recording a file version
-- (20,000 single-row inserts with the version subquery, server side: ~270 ms with the
-- path key, ~530 ms with SHA-256, ~310 ms with MD5; docs/measurements/postgres.md).
-- SQLite keeps its keys: its b-tree takes a key of any length.
ALTER TABLE files DROP CONSTRAINT files_session_id_path_version_key;
CREATE UNIQUE INDEX files_session_path_version ON files (session_id, md5(path), version);

ALTER TABLE import_files DROP CONSTRAINT import_files_pkey;
CREATE UNIQUE INDEX import_files_source_path ON import_files (source, md5(path));
