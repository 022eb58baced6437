-- Rendered Markdown and full-text search (issue #4), the PostgreSQL way.

-- Bodies rendered to sanitized HTML once, when written, so no read
-- renders. NULL means "not rendered": a row copied in without it. Readers
-- render such a row themselves (src/store/postgres/rows.rs), and
-- `pith seed` renders as it writes, so there is no backfill pass.
ALTER TABLE posts ADD COLUMN body_html TEXT;
ALTER TABLE topics ADD COLUMN body_html TEXT;

-- Search vectors, derived by PostgreSQL itself: generated columns hold the
-- words of exactly the rows the public may read by their own flags (NULL
-- for a deleted or removed row), whichever code writes; searches also
-- check the topic of a post (a removed topic hides its replies). They are
-- not part of the portable schema: `pith migrate` copies the columns of
-- migrations/sqlite and PostgreSQL recomputes these.
-- pith_english: Snowball stemming ("cards" finds "card"), as FTS5's
-- porter, after unaccent ("cafe" finds "café"), as FTS5's
-- remove_diacritics. unaccent is a trusted contrib extension: the
-- database's owner may create it.
-- A title's words weigh A and a body's B; ranking weighs A five times B,
-- as SQLite's bm25(5.0, 1.0).
CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE TEXT SEARCH CONFIGURATION pith_english (COPY = english);
ALTER TEXT SEARCH CONFIGURATION pith_english
    ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem;

ALTER TABLE topics ADD COLUMN fts tsvector GENERATED ALWAYS AS (
    CASE WHEN deleted OR removed THEN NULL
    ELSE setweight(to_tsvector('pith_english'::regconfig, title), 'A')
      || setweight(to_tsvector('pith_english'::regconfig, coalesce(body, '')), 'B')
    END
) STORED;
ALTER TABLE posts ADD COLUMN fts tsvector GENERATED ALWAYS AS (
    CASE WHEN deleted OR removed THEN NULL
    ELSE to_tsvector('pith_english'::regconfig, body)
    END
) STORED;
CREATE INDEX topics_fts ON topics USING gin (fts);
CREATE INDEX posts_fts ON posts USING gin (fts);
