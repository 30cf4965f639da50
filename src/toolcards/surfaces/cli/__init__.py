"""The command-line wing: ``list``, ``describe``, ``call``, ``approvals``, ``audit``, ``team``,
and the control socket a running ``toolcards serve`` answers them on (:mod:`.control`).

Imports the shared surfaces modules and never another wing; the whole ``toolcards`` command
line (with ``serve`` and ``dashboard``) is composed in :mod:`toolcards.surfaces.commands`.
"""
