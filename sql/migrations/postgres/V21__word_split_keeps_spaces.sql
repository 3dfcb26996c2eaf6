-- Scribe schema for PostgreSQL, version 21: a part's words are split with fewer regular
-- expression matches, to the same words at the same positions; the session bump's trigger
-- conditions move into the trigger functions; a part's stored texts are compressed with
-- lz4 where the server has it (at the end).
--
-- Since V13 `scribe_search_words` replaced every run of non-alphanumerics with one space
-- (`regexp_replace(text, '[^[:alnum:]]+', ' ', 'g')`) before `to_tsvector('scribe', …)`,
-- so that the parser, which keeps paths, URLs and hyphenated words as tokens of their own,
-- sees only alphanumeric runs. Each match of `regexp_replace` restarts PostgreSQL's regular
-- expression search (a few thousand instructions per match), and in ordinary text nearly
-- every match is one space between two words: a match per word.
--
-- Now the spaces stay where they are and only the runs of other non-alphanumerics become a
-- space (`[^[:alnum:] ]+`). The text the parser reads differs from V13's only in how many
-- spaces stand between two alphanumeric runs (and before the first or after the last); the
-- runs are the same, in the same order, and the parser gives a run of spaces one blank token
-- however long it is (a blank token takes no position: the `scribe` configuration maps no
-- dictionary to it). So the words and their positions are V13's exactly: the stored words
-- (`parts_fts.words`) stay valid, nothing is recomputed, and `scribe db check` (which
-- recomputes them with this function) finds them equal. A test compares this function with
-- V13's expression on a corpus of diacritics, CJK, digits, underscores, hyphens, paths,
-- whitespace of every kind and long words (crates/db/tests/postgres.rs).
--
-- Measured (callgrind, instructions of one server backend per append of the bench's
-- messages, pgbench running the append's statements): 5.03M -> 4.20M per append (-16%);
-- on the bench's stored texts the split alone takes about a quarter of V13's time.

CREATE OR REPLACE FUNCTION scribe_search_words(text TEXT) RETURNS tsvector
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_tsvector('scribe'::regconfig, regexp_replace(text, '[^[:alnum:] ]+', ' ', 'g'))
$$;


-- The session bump's two WHEN clauses move into the functions they guard. PostgreSQL reads
-- a trigger's WHEN clause back from its stored text (stringToNode) in every statement that
-- fires the trigger, ~20K instructions each, and every append updates its session's row
-- at least once (the message counter; once more per tool part) from inside a trigger:
-- callgrind as above, 4.12M instructions per append with the clauses, 4.02M without them,
-- 4.04M with the same test in the functions. The functions now test the setting
-- themselves: `sessions_touch` leaves the row as it is and `sessions_notify` announces
-- nothing while `scribe.bump` is on, as the clauses did (an AFTER trigger's clause was
-- evaluated when the row changed; the function runs at the end of the same UPDATE, still
-- inside the bump, so the setting is the same). The other tables' touch triggers share
-- `scribe_touch`; the bump is never on while they fire. `sessions_notify_flush` keeps its
-- WHEN: without it every changed row would queue a deferred call.

CREATE OR REPLACE FUNCTION scribe_touch() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    -- V19's bump of a session's row is no change of it (the trigger's WHEN clause until
    -- V21): updated_at stays.
    IF current_setting('scribe.bump', true) = 'on' THEN
        RETURN NEW;
    END IF;
    IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := greatest(OLD.updated_at, scribe_now_ms());
    END IF;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION scribe_notify_change() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    row_id TEXT;
    session TEXT;
    item TEXT;
    pending TEXT;
    mark TEXT;
    bumped TEXT;
BEGIN
    -- V19's bump of a session's row is no change of it (the trigger's WHEN clause until
    -- V21): its update is not announced.
    IF TG_TABLE_NAME = 'sessions' AND current_setting('scribe.bump', true) = 'on' THEN
        RETURN NULL;
    END IF;
    -- Separate branches: PL/pgSQL resolves every field an expression names, and a
    -- sessions row has no session_id.
    IF TG_OP = 'DELETE' THEN
        row_id := OLD.id;
        IF TG_TABLE_NAME = 'sessions' THEN
            session := OLD.id;
        ELSE
            session := OLD.session_id;
        END IF;
    ELSE
        row_id := NEW.id;
        IF TG_TABLE_NAME = 'sessions' THEN
            session := NEW.id;
        ELSE
            session := NEW.session_id;
        END IF;
    END IF;
    item := json_build_array(TG_TABLE_NAME, lower(TG_OP), row_id, session)::text;
    pending := coalesce(current_setting('scribe.pending', true), '');
    IF TG_TABLE_NAME <> 'sessions' THEN
        -- The session's row, unless this transaction wrote it already: a sessions item
        -- ends with `"ses_…", "ses_…"]` (json_build_array's spacing; no other item has
        -- its session id twice), or it was bumped before.
        mark := to_json(session)::text;
        IF strpos(pending, mark || ', ' || mark || ']') = 0 THEN
            bumped := coalesce(current_setting('scribe.bumped', true), '');
            IF strpos(bumped, mark) = 0 THEN
                PERFORM set_config('scribe.bumped', bumped || mark, true);
                PERFORM set_config('scribe.bump', 'on', true);
                UPDATE sessions SET message_count = message_count WHERE id = session;
                PERFORM set_config('scribe.bump', '', true);
            END IF;
        END IF;
    END IF;
    IF pending = '' THEN
        pending := item;
    ELSIF strpos(pending, item) = 0 THEN
        pending := pending || ',' || item;
    ELSE
        RETURN NULL;
    END IF;
    IF length(pending) > 6000 THEN
        PERFORM scribe_notify_send(pending);
        pending := '';
    END IF;
    PERFORM set_config('scribe.pending', pending, true);
    RETURN NULL;
END;
$$;

DROP TRIGGER sessions_touch ON sessions;
CREATE TRIGGER sessions_touch BEFORE UPDATE ON sessions
FOR EACH ROW EXECUTE FUNCTION scribe_touch();
DROP TRIGGER sessions_notify ON sessions;
CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE OR DELETE ON sessions
FOR EACH ROW EXECUTE FUNCTION scribe_notify_change();

-- A part's stored texts are compressed with lz4 where the server has it. A `parts_fts` row
-- holds a part's text and its words, so the row of a part of a kilobyte or more passes the
-- 2 kB at which PostgreSQL compresses it, and pglz (the default) spent ~2% of an append's
-- server instructions there (callgrind as above: 4.20M -> 4.11M per append with lz4, which
-- also decompresses faster when a search reads the text back). Rows already stored keep
-- their compression; a server built without lz4 keeps pglz. One block (sqlgen skips it:
-- it changes no table's shape).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE parts ALTER COLUMN data SET COMPRESSION lz4;
        ALTER TABLE parts_fts ALTER COLUMN search_text SET COMPRESSION lz4,
            ALTER COLUMN words SET COMPRESSION lz4;
    END IF;
END;
$$;
