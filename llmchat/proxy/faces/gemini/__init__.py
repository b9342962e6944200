"""The Gemini face (placeholder: the face helper on branch gemini-face owns this file)."""
