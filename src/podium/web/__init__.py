"""The browser pages: the live board and the ops page (``routes.py``), static, no build."""
