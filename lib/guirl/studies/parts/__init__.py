"""Stage-level parts of a notebook's study: ``parts/<name>/`` belongs to ``studies/<name>.py`` alone
(``tests/test_layout.py``): only that study module and the package's own modules import it."""
