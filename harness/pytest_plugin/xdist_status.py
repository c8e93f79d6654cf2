"""pytest-xdist's status line, once: with ``-q`` on a pipe (how ``run`` starts pytest)
xdist writes "bringing up nodes..." when the workers start and the same line again when
they have collected. `StatusOnce` drops a repeat of the line last shown."""

from __future__ import annotations

from typing import Any

import pytest


class StatusOnce:
    """On the controller: xdist's reporter shows a status line only when it changed."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminaldistreporter")
        if reporter is not None:
            show_changed_status_only(reporter)


def show_changed_status_only(reporter: Any) -> None:
    """Wrap ``reporter.ensure_show_status`` so that a line equal to the last one it
    showed is not written again (a changed line, such as the workers' counts, still is)."""
    show = reporter.ensure_show_status
    last: list[str] = []

    def ensure_show_status() -> None:
        line = reporter.getstatus()
        if last[-1:] == [line]:
            return
        last.append(line)
        show()

    reporter.ensure_show_status = ensure_show_status
