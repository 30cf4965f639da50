"""``python -m toolcards.demo``: the offline demo."""

from __future__ import annotations

from toolcards.demo.basic import run

if __name__ == "__main__":
    run()
