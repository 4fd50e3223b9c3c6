"""The one table of the project's languages: code -> the official `qwen_tts` language name.

The paper's six languages. Codes are what params files, tables and metrics use; official names are what the
talker's prompt and `generate(languages=...)` take. `SPACELESS`: written without spaces between words, so
error rates there are character error rates.
"""

LANGUAGES = {"en": "english", "de": "german", "es": "spanish", "ru": "russian", "ja": "japanese", "zh": "chinese"}
CODES = tuple(LANGUAGES)
SPACELESS = ("ja", "zh")
