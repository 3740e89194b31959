"""The governed read path for pack builders: channels, gates, packs (DESIGN §7)."""
