"""Every problem at once: checks add what they find to a ``Problems`` collector instead of
raising the first, and the caller raises them together (one ``file:line: field: message``
line each, in the order they were found)."""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from .errors import BadInput, JobFileError


class JobFileProblems(JobFileError):
    """Several job file problems at once, one ``file:line: field: message`` line each (the
    attributes are the first one's)."""

    def __init__(self, problems: "list[JobFileError]"):
        self.problems = list(problems)
        first = self.problems[0]
        self.file, self.line, self.field, self.detail = first.file, first.line, first.field, first.detail
        BadInput.__init__(self, "\n".join(str(p) for p in self.problems))

    @staticmethod
    def raise_all(problems: "list[JobFileError]") -> None:
        """Raise the one problem, or all of them together; nothing when there is none."""
        if len(problems) == 1:
            raise problems[0]
        if problems:
            raise JobFileProblems(problems)


class ManyProblems(BadInput):
    """Several problems, some without a file and line (the CLI prints one line each)."""

    def __init__(self, problems: List[BadInput]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class Problems:
    """What the checks of one job found so far."""

    def __init__(self) -> None:
        self.found: List[BadInput] = []

    def add(self, problem: BadInput) -> None:
        for one in getattr(problem, "problems", None) or [problem]:
            if str(one) not in {str(p) for p in self.found}:
                self.found.append(one)

    def collect(self, check: Callable[..., Any], *args, **kwargs) -> Optional[Any]:
        """``check(*args, **kwargs)``; a ``BadInput`` it raises is added, and None returned."""
        try:
            return check(*args, **kwargs)
        except BadInput as exc:
            self.add(exc)
            return None

    def __bool__(self) -> bool:
        return bool(self.found)

    def raise_all(self) -> None:
        """Raise the one problem, or all of them together; nothing when there is none."""
        if len(self.found) == 1:
            raise self.found[0]
        file_errors = [p for p in self.found if isinstance(p, JobFileError)]
        if self.found and len(file_errors) == len(self.found):
            raise JobFileProblems(file_errors)
        if self.found:
            raise ManyProblems(self.found)
