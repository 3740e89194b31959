-- A version whose text an extractor made (a PDF, a Word file, an HTML page) keeps the
-- content its event carried (base64 for a binary file): `content` is the canonical text
-- its chunks' spans point into, and a new extractor version re-extracts from this one
-- without going back to the source. Purged with the version's content.
ALTER TABLE document_versions ADD COLUMN raw_content text;
