"""The ``paretosearch`` command. :mod:`.main` parses and dispatches, and holds ``simulate``,
``policies`` and ``profiles``; the other subcommands live by concern: a search and its run
(``search``, ``front``, ``select``) in :mod:`.runs`, ``retune`` in :mod:`.retune`, ``export``
in :mod:`.export`."""

from paretosearch.cli.main import main

__all__ = ["main"]
