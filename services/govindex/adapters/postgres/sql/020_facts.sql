-- Facts from structured sources (fact mappings). An edge says how it was made (`method`:
-- frontmatter, or facts:<mapping>) and how sure that is (`confidence`), and which chunk of
-- its version states it (`evidence_ordinal`: the entry's, kept across a re-chunk). An edge
-- with `own_time` holds over its entry's validity fields rather than its document's: the
-- window is the row's own, so a newer version's rows replace it instead of ending it.
ALTER TABLE graph_edges ADD COLUMN method text NOT NULL DEFAULT 'frontmatter';
ALTER TABLE graph_edges ADD COLUMN confidence real NOT NULL DEFAULT 1;
ALTER TABLE graph_edges ADD COLUMN evidence_ordinal integer;
ALTER TABLE graph_edges ADD COLUMN own_time boolean NOT NULL DEFAULT false;
-- An entity some fact entry declared by its business id; a reference to any other id is
-- kept as written and reads as unresolved (never merged by name).
ALTER TABLE graph_entities ADD COLUMN declared boolean NOT NULL DEFAULT false;
