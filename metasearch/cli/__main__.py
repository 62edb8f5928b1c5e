"""``python -m metasearch.cli``: the ``metasearch`` command."""

from metasearch.cli import main

if __name__ == "__main__":
    main()
