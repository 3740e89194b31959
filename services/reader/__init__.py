"""The governed read path for pack builders: channels, gates, packs (docs/design/read-path.md)."""
