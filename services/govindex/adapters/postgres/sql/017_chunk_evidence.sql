-- The kinds of evidence a chunk can support (deployment_record, root_cause, step, …): from
-- its document's frontmatter, its source manifest's evidence_rules and its kind. A pack
-- request's required_evidence selects by them first.
ALTER TABLE chunks ADD COLUMN evidence text[] NOT NULL DEFAULT '{}';
CREATE INDEX chunks_evidence ON chunks USING gin (evidence);
