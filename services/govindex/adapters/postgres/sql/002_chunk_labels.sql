-- Structure-aware parsers: labels (step:2, clause:4.1.2, key:..., part:1/3, merged:2, ref:...)
-- and context (text repeated for a reader, e.g. a table header; never part of the span).
ALTER TABLE chunks ADD COLUMN labels text[] NOT NULL DEFAULT '{}';
ALTER TABLE chunks ADD COLUMN context text NOT NULL DEFAULT '';
CREATE INDEX chunks_labels ON chunks USING gin (labels);
