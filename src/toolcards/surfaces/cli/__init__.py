"""The command-line wing: ``list``, ``describe``, ``call``, ``approvals``, ``audit``, ``team``.

Imports the shared surfaces modules and never another wing; the whole ``toolcards`` command
line (with ``serve`` and ``dashboard``) is composed in :mod:`toolcards.surfaces.commands`.
"""
