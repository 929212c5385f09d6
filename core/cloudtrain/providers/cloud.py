"""``CloudProvider``: the lifecycle every remote platform's provider shares, written once.

Template methods, as torchx's schedulers do it: the core owns the flow, a plugin fills in the
platform's calls.  No plugin overrides a step of the template.

- ``submit`` (``schedule``), one pipeline: ship the code where the request's ``code_upload`` says
  (content-addressed, once) → the spec hash of the rendered request and the shipped archive (of
  the code, when nothing is shipped: each file is read once per submit) → ``fill`` the
  placeholders (``cloudtrain.providers.request``) → ``_find_by_spec`` (a job an earlier submit of the same
  spec created: submitting again, or a create whose answer was lost, follows that job), else
  ``_create``, which gets the filled typed request.  What ``_create`` makes before the job
  runs (instances, a Secret, ...) it announces with ``made(what, undo)``: when a later step of
  the submit fails (or is interrupted), ``schedule`` undoes each, newest first, before the error
  leaves it, and an undo that fails is named in the error (what is left, to remove by hand);
- ``status``: ``_describe`` + ``_to_status``, read at most once per ``status_poll`` seconds
  (the CLI's status line and the log follower share the read);
- ``cancel``: idempotent: a job that ended, or is stopping, is left alone; ``_stop`` otherwise,
  and a stop that fails because the job ended meanwhile is not an error; then ``_release``
  (whatever the job's state: what a job holds after its end, e.g. instances kept up);
- ``logs``: ``_log_chunks`` until the job ends, one read per ``status_poll`` seconds; the
  secrets' values of a job this process submitted (found or created) are masked in them; in
  another process, what ``requestlog.masker`` can know (the values readable there, whatever
  follows a secret's name, token shapes).

``status_poll`` is the one poll setting: the class's default, ``$CLOUDTRAIN_POLL_SECONDS``, or the
constructor's ``poll``.
"""
from __future__ import annotations

import abc
import dataclasses
import hashlib
import os
import time
from datetime import datetime
from typing import Any, Callable, ClassVar, Dict, Iterable, Iterator, List, Optional, Tuple

from ..spec.errors import BadInput, CloudtrainError, PlatformError
from .provider import JobStatus, Provider
from .request import CodeUpload, Placeholder, Rendered, Shipped, fill
from ..input.secrets import Masker

POLL_VARIABLE = "CLOUDTRAIN_POLL_SECONDS"


def poll_setting(poll: Optional[float], default: float) -> float:
    """The one poll setting: ``poll`` (a constructor's), else ``$CLOUDTRAIN_POLL_SECONDS``, else
    the provider's ``default``."""
    if poll is not None:
        return float(poll)
    return float(os.environ.get(POLL_VARIABLE) or default)


def spec_hash(rendered: Rendered, code_digest: Optional[str] = None) -> str:
    """sha256 of the rendered envelope (placeholders and masks as rendered), a NUL, and
    ``code_digest``: the shipped archive's sha256 (a reproducible archive: the same code and
    launcher give the same bytes), else the code's own (``shipping.code_digest``, read here).
    The same job file and code give the same hash."""
    if code_digest is None:
        from ..transfer.shipping import code_digest as digest_of
        code_digest = digest_of(rendered.job)
    return hashlib.sha256(rendered.to_json().encode() + b"\0" + code_digest.encode()).hexdigest()


def timestamp(value: Any) -> Optional[float]:
    """Seconds since the epoch from what a platform's API returns: a ``datetime``, an ISO 8601
    / RFC 3339 string (``Z`` or an offset), or nothing; None when it cannot be read."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(str(value).strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class CloudProvider(Provider):
    """Base of the providers whose jobs run on a remote platform.  A plugin implements
    ``_find_by_spec``, ``_create``, ``_describe``, ``_to_status``, ``_stop``, ``_log_chunks`` and
    ``list`` (and ``render_request``); see docs/plugins.md#cloudprovider."""

    # Seconds between reads of a remote job while it is followed or waited for (the class's
    # default; ``__init__`` sets the instance's from ``poll`` and $CLOUDTRAIN_POLL_SECONDS).
    status_poll: float = 5.0
    # Raw states in which a stop is already under way (cancel then leaves the job alone).
    stopping: ClassVar[Tuple[str, ...]] = ()
    # How many hex digits of the spec hash the platform keeps (a tag's or a name's limit); None: all.
    spec_hash_length: ClassVar[Optional[int]] = None
    # Modules the code archive's launcher bundle ships besides the node platform's detector
    # (``"module:function"`` or a module), e.g. a node prelude that fetches secrets.
    node_modules: ClassVar[Tuple[str, ...]] = ()
    # Why ``cloudtrain stage`` has nothing to upload for a job whose request has no ``code_upload``.
    no_code_upload: ClassVar[str] = ("this job's code is not uploaded by cloudtrain (it travels inside the request, "
                                     "or the image or a path the platform mounts holds it)")

    def __init__(self, *, poll: Optional[float] = None):
        super().__init__()
        self.status_poll = poll_setting(poll, type(self).status_poll)
        self._statuses: Dict[str, Tuple[float, JobStatus]] = {}
        self._maskers: Dict[str, Masker] = {}  # the secrets of the jobs this process submitted, by id
        self._submit_made: List[Tuple[str, Callable[[], Any]]] = []  # what the submit under way made (``made``)

    # -- what a plugin implements ---------------------------------------------------------------
    def _find_by_spec(self, rendered: Rendered, spec: str) -> Optional[str]:
        """The id of the job an earlier submit of this spec created, if there is one
        (``rendered.request``: the typed request with its placeholders filled in)."""
        return None

    @abc.abstractmethod
    def _create(self, rendered: Rendered, secrets: Dict[str, str], spec: str) -> str:
        """Send ``rendered.request`` (the typed request, its placeholders filled in) with the
        ``secrets``' values where the platform takes them; return the new job's id."""

    @abc.abstractmethod
    def _describe(self, job_id: str) -> Any:
        """The platform's description of the job (one API read)."""

    @abc.abstractmethod
    def _to_status(self, job_id: str, described: Any) -> JobStatus:
        """The neutral status of a description (the provider's one state table)."""

    @abc.abstractmethod
    def _stop(self, job_id: str) -> None:
        """Ask the platform to stop a running job."""

    def made(self, what: str, undo: Callable[[], Any]) -> None:
        """``_create`` made ``what`` (e.g. "2 instance(s) i-1, i-2"); ``undo()`` removes it.  When the
        submit fails after this (in ``_create`` or later in ``schedule``, an interrupt too),
        ``schedule`` calls ``undo`` before the error leaves it; once the submit returns the job
        owns it (``cancel`` and ``_release`` remove it then)."""
        self._submit_made.append((what, undo))

    def _release(self, job_id: str) -> bool:
        """What the job still holds, let go (``cancel`` calls it whatever the job's state, after
        ``_stop``: e.g. machines a platform keeps up after the job ended); True when something
        was (the status is then read again).  Nothing by default."""
        return False

    def _log_chunks(self, job_id: str, described: Any, cursor: Dict[str, Any], final: bool) -> Iterable[str]:
        """The lines logged since the last call (``cursor`` is the plugin's own state between
        calls, empty at first); ``final``: the job has ended, flush what is pending.  A plugin
        that streams may keep yielding lines as they arrive for up to ``status_poll`` seconds:
        the loop then reads the status again at once."""
        return ()

    def code_store(self, upload: CodeUpload):
        """The object store a code archive goes to (``objectstore.open_store`` of its URL's scheme,
        with the upload's region and endpoint); a provider with its own SDK clients gives its own."""
        from ..transfer.objectstore import ObjectUrl, open_store
        settings = {k: v for k, v in (("region", upload.region), ("endpoint", upload.endpoint)) if v}
        return open_store(ObjectUrl.parse(upload.url), **settings)

    def checkpoint_store(self, url, job):
        """The store ``job``'s ``storage.checkpoint`` (``url``) is kept in, reached with this
        provider's clients and account (the controller carries a checkpoint between providers):
        the store its code goes to when that one reads the URL's scheme, else the registered store
        of the scheme."""
        from ..transfer.objectstore import open_store
        store = self.code_store(CodeUpload(url=str(url), region=getattr(self.options(job), "region", None)))
        return store if store.scheme == url.scheme else open_store(url)

    # -- the template -------------------------------------------------------------------------
    def spec_hash(self, rendered: Rendered, shipped: Optional[Shipped] = None) -> str:
        """``spec_hash`` of the render and of what ``ship`` sent (the code is not read again),
        cut to ``spec_hash_length``."""
        return spec_hash(rendered, shipped.digest if shipped else None)[:self.spec_hash_length]

    def ship(self, rendered: Rendered) -> Optional[Shipped]:
        """The job's archive (the code and the launcher bundle) where the request's ``code_upload``
        says, unless it is there already (``objectstore.upload_once``); None when the request has
        no ``code_upload``."""
        upload = rendered.request.code_upload
        if upload is None:
            return None
        from ..transfer.objectstore import ObjectUrl, upload_once
        code = rendered.job.code_path
        if code is None:  # a request that uploads code for a job without any (``code: null``)
            raise self.null_code(rendered.job)
        if not code.is_dir():
            raise self.job_error(rendered.job, ("code",), f"the code directory {code} does not "
                                                          "exist; fix `code` (relative to the job file)")
        data, digest = self.code_archive(rendered)
        url = fill(upload.url, {Placeholder.CODE_DIGEST: digest})
        upload_once(self.code_store(upload), ObjectUrl.parse(url, "the code's URL"), data)
        return Shipped(url, digest)

    def code_archive(self, rendered: Rendered) -> Tuple[Any, str]:
        """The archive ``ship`` uploads and its sha256: the code and the launcher bundle with the
        node platform's detector (``shipping.packed``).  A provider whose nodes get the launcher
        another way packs the code alone (``shipping.code_archive``); one whose render fixed the
        archive's digest refuses code that changed since."""
        from ..transfer import shipping
        return shipping.packed(rendered.job, (self.detector_target(), *self.node_modules))

    def ship_code(self, rendered: Rendered) -> List[str]:
        """``cloudtrain stage``: the code shipped as a submit ships it; its URL."""
        shipped = self.ship(rendered)
        if shipped is None:
            raise BadInput(f"{self.no_code_upload}: there is nothing to stage; "
                           "cloudtrain submit sends the job as it is")
        return [shipped.url]

    def placeholder_values(self, spec: str, shipped: Optional[Shipped]) -> Dict[str, str]:
        values = {Placeholder.SPEC_HASH: spec}
        if shipped is not None:
            values.update({Placeholder.CODE_DIGEST: shipped.digest, Placeholder.CODE_URL: shipped.url})
        return values

    def schedule(self, rendered: Rendered, secrets: Dict[str, str]) -> str:
        """The one submit pipeline (see the module's docstring); not overridden by plugins."""
        shipped = self.ship(rendered)
        spec = self.spec_hash(rendered, shipped)
        filled = dataclasses.replace(rendered, request=fill(rendered.request, self.placeholder_values(spec, shipped)))
        job_id = self._find_by_spec(filled, spec)
        if job_id is None:
            self._submit_made = []
            try:
                job_id = self._create(filled, secrets, spec)
            except BaseException as exc:
                self._undo_made(exc)
                raise
            finally:
                self._submit_made = []
        self._statuses.pop(job_id, None)
        if secrets:  # the job's logs, followed by this process, show them masked
            self._maskers[job_id] = Masker(secrets.values())
        return job_id

    def _undo_made(self, exc: BaseException) -> None:
        """Undo what the failed submit made, newest first; what could not be undone is named in
        ``exc``'s message (a cloudtrain error's one line), or in a warning for any other error."""
        left, removed = [], []
        for what, undo in reversed(self._submit_made):
            try:
                undo()
                removed.append(what)
            except Exception as failed:  # noqa: BLE001  (the next one is still undone; this one is named)
                left.append(f"{what} ({str(failed).splitlines()[0][:200] if str(failed) else type(failed).__name__})")
        if not left:
            if removed and isinstance(exc, CloudtrainError) and exc.args:
                exc.args = (f"{exc.args[0]}; removed what this submit had made: {'; '.join(removed)}", *exc.args[1:])
            return
        note = (f"; the submit made what it could not remove, still there: {'; '.join(left)}: "
                f"remove it in the {self.name} console")
        if isinstance(exc, CloudtrainError) and exc.args:
            exc.args = (f"{exc.args[0]}{note}", *exc.args[1:])
        else:
            import warnings
            from ..spec.errors import CloudtrainWarning
            warnings.warn(CloudtrainWarning(note[2:]), stacklevel=3)

    def _remember(self, job_id: str, status: JobStatus) -> JobStatus:
        self._statuses[job_id] = (time.monotonic(), status)
        return status

    def fresh_status(self, job_id: str) -> JobStatus:
        return self._remember(job_id, self._to_status(job_id, self._describe(job_id)))

    def status(self, job_id: str) -> JobStatus:
        cached = self._statuses.get(job_id)
        if cached and time.monotonic() - cached[0] < self.status_poll:
            return cached[1]
        return self.fresh_status(job_id)

    def cancel(self, job_id: str) -> JobStatus:
        status = self._stop_unless_ended(job_id)
        return self.fresh_status(job_id) if self._release(job_id) else status

    def _stop_unless_ended(self, job_id: str) -> JobStatus:
        status = self.fresh_status(job_id)
        if status.terminal or (status.raw_state or "") in self.stopping:
            return status
        try:
            self._stop(job_id)
        except PlatformError:
            status = self.fresh_status(job_id)
            if status.terminal:  # it ended between the read and the stop
                return status
            raise
        return self.fresh_status(job_id)

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        cursor: Dict[str, Any] = {}
        # this process's own submit knows the values; any other (logs from another shell, the
        # dashboard) masks from where the secrets came from (requestlog.masker), never stored values
        from ..runtime import requestlog
        mask = self._maskers.get(job_id) or requestlog.masker(self.handle(job_id))
        while True:
            described = self._describe(job_id)
            status = self._remember(job_id, self._to_status(job_id, described))
            final = not follow or status.terminal
            began = time.monotonic()
            chunks = self._log_chunks(job_id, described, cursor, final)
            yield from (map(mask, chunks) if mask else chunks)
            if final:
                return
            # a plugin whose _log_chunks waits for lines as they arrive has used up the poll
            time.sleep(max(0.0, self.status_poll - (time.monotonic() - began)))
