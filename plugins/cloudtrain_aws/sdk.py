"""The AWS SDK side of the plugin: boto3 sessions and clients (retries, regions, credentials) and
THE one error translator, ``AwsClients.api``: a botocore error becomes cloudtrain's
(``PlatformError`` with AWS's code, message, request id and a hint; ``JobNotFound``;
``MissingCredentials``).  boto3 and botocore are imported inside the functions, never at module
level: ``cloudtrain render`` of any provider must not pay for them.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Optional, Tuple

from cloudtrain import __version__
from cloudtrain.spec.errors import BadInput, JobFileError, JobNotFound, MissingCredentials, PlatformError
from cloudtrain.spec.job import JobSpec

if TYPE_CHECKING:  # annotations only: render imports no SDK
    from boto3.session import Session
    from botocore.client import BaseClient

_HINTS = (
    (("AccessDenied", "UnauthorizedOperation", "AuthFailure", "AccessDeniedException"),
     "grant the calling IAM identity this permission, or use other credentials (AWS_PROFILE)"),
    (("ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
      "SignatureDoesNotMatch", "InvalidSignatureException"),
     "refresh or fix your AWS credentials (aws sso login, aws configure, AWS_PROFILE)"),
    (("ResourceLimitExceeded", "InstanceLimitExceeded", "InsufficientInstanceCapacity", "VcpuLimitExceeded",
      "MaxSpotInstanceCountExceeded"),
     "ask AWS for a quota increase, or use fewer or other instances"),
    (("ThrottlingException", "Throttling", "RequestLimitExceeded", "TooManyRequestsException", "SlowDown"),
     "try again later (cloudtrain already retried with backoff; AWS_MAX_ATTEMPTS raises the number of tries)"),
    (("NoSuchBucket",), "create the bucket or fix the s3:// option"),
    (("NoSuchEntity", "InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidSubnetID.NotFound",
      "InvalidGroup.NotFound", "InvalidKeyPair.NotFound", "InvalidParameterValue"),
     "check the option's value: it does not exist in this account and region"),
)


def hint_for(code: str) -> str:
    for codes, hint in _HINTS:
        if code in codes:
            return hint
    if code.startswith("Invalid") or code in ("ValidationException", "ValidationError", "MissingParameter"):
        return "fix the request (`cloudtrain render -p PROVIDER JOB.yaml` shows it)"
    return "see AWS's message above"


def no_region(provider: str, job: Optional[JobSpec] = None, submit: bool = False) -> BadInput:
    """No region anywhere boto3 looks.  botocore reads ``AWS_DEFAULT_REGION`` (not ``AWS_REGION``):
    botocore/configprovider.py, ``'region': ('region', 'AWS_DEFAULT_REGION', None, None)``.  The
    job-file option is named only when a job is at hand (submit: ``job`` or ``submit``), not on
    status/logs/cancel/list."""
    fix = (f"set providers.{provider}.region (or --set providers.{provider}.region=us-east-1), "
           "AWS_DEFAULT_REGION, or a profile's region (aws configure)")
    if job is not None:
        return JobFileError.at(job, ("providers", provider, "region"), f"no AWS region: {fix}")
    if submit:
        return BadInput(f"no AWS region: {fix}")
    return BadInput(f"no AWS region: export AWS_DEFAULT_REGION (e.g. us-east-1) or set a profile's region "
                    f"(aws configure), or name the region in the handle: {provider}://REGION/NAME")


# Where boto3's default chain looks, in its order (botocore/credentials.py, ``create_credential_resolver``:
# env, assume-role, web identity, sso, the shared credentials file, the config file, process, container,
# instance metadata), looked at offline for ``cloudtrain doctor``: names and files, never values.
def offline_credentials() -> Tuple[bool, str]:
    """``(found, where)`` of the AWS credentials a provider of this plugin would use, offline."""
    from cloudtrain.input.credsources import env_set, file_at, ini_has_section
    looked = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials, ~/.aws/config, " \
             "AWS_WEB_IDENTITY_TOKEN_FILE, container/instance metadata"
    if env_set("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        return True, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
    profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"
    creds = file_at(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials")
    config = file_at(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")
    if ini_has_section(creds, (profile,)):
        return True, f"profile {profile!r} in {creds}"
    if ini_has_section(config, (profile, f"profile {profile}")):
        return True, f"profile {profile!r} in {config} (sso, role or process credentials: --online checks them)"
    if env_set("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        return True, "a web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN)"
    if os.environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return True, "the container's credentials endpoint (AWS_CONTAINER_CREDENTIALS_*)"
    if os.environ.get("AWS_PROFILE"):
        return False, (f"AWS_PROFILE={profile}: no such profile in {creds or '~/.aws/credentials'} or "
                       f"{config or '~/.aws/config'}; fix AWS_PROFILE, or run `aws configure --profile {profile}`")
    return False, (f"none found (looked in: {looked}; an EC2 instance role is not checked offline); "
                   "run `aws configure` or `aws sso login`, or set AWS_PROFILE")


def aws_credentials(session):
    """The credentials of boto3's default chain, or ``MissingCredentials`` naming where it looked
    (nothing is sent: botocore signs a request with them before sending it)."""
    credentials = session.get_credentials()
    if credentials is not None:
        return credentials
    core = getattr(session, "_session", session)  # boto3's Session wraps botocore's
    profile = session.profile_name or "default"
    files = " and ".join(os.path.expanduser(core.get_config_variable(v)) for v in ("credentials_file", "config_file"))
    metadata = ("container and EC2 instance metadata" if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower()
                != "true" else "container metadata, not EC2 instance metadata: AWS_EC2_METADATA_DISABLED=true")
    raise MissingCredentials(
        "AWS", f"AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profile {profile!r} in {files}, {metadata}",
        "run `aws configure` or `aws sso login`, set AWS_PROFILE to a profile that has them, or export "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")


class AwsClients:
    """boto3 clients for a provider (mixed into ``AwsProvider``): made from the injected
    ``Session`` or boto3's default chain, one per service and region, or the injected ready
    clients (tests point them at a double)."""

    name: ClassVar[str]

    def _init_clients(self, session: Optional["Session"], injected: Dict[str, Optional["BaseClient"]]) -> None:
        self._session = session
        self._injected = {name: client for name, client in injected.items() if client is not None}
        self._made: Dict[tuple, Any] = {}
        self._clients_lock = threading.Lock()

    # -- clients ------------------------------------------------------------------------------
    @staticmethod
    def retry_config():
        """botocore's standard (or adaptive) retry mode: throttling, 5xx and dropped connections
        are retried with backoff (``AWS_RETRY_MODE``, ``AWS_MAX_ATTEMPTS`` change it)."""
        from botocore.config import Config
        return Config(retries={"mode": os.environ.get("AWS_RETRY_MODE") or "standard",
                               "max_attempts": int(os.environ.get("AWS_MAX_ATTEMPTS") or 8)},
                      connect_timeout=10, read_timeout=70, user_agent_extra=f"cloudtrain/{__version__}")

    def session(self):
        """The injected session, else boto3's default one (credentials and region from the default chain)."""
        if self._session is not None:
            return self._session
        boto3 = self.require_sdk("boto3")
        from botocore.exceptions import ProfileNotFound
        try:
            return boto3.session.Session()
        except ProfileNotFound as exc:
            raise BadInput(f"{exc}; fix AWS_PROFILE or the profiles in ~/.aws/config") from None

    def client(self, service: str, region: Optional[str] = None):
        if service in self._injected:
            return self._injected[service]
        key = (service, region)
        with self._clients_lock:
            if key not in self._made:
                session = self.session()
                aws_credentials(session)
                from botocore.exceptions import NoRegionError
                try:
                    self._made[key] = session.client(service, region_name=region, config=self.retry_config())
                except NoRegionError:  # submit resolves the region first (region_of): no job here
                    raise no_region(self.name) from None
            return self._made[key]

    @contextmanager
    def api(self, what: str, not_found: Optional[Callable[[str, str], bool]] = None, job_id: Optional[str] = None):
        """Translate boto errors into cloudtrain's: PlatformError (exit 3) with AWS's code, message
        and request id; an error ``not_found(code, message)`` recognises into JobNotFound (exit 2)."""
        from botocore.exceptions import (BotoCoreError, ClientError, ConnectionClosedError, EndpointConnectionError,
                                         NoCredentialsError, ReadTimeoutError)
        try:
            yield
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code, message = str(err.get("Code", "?")), str(err.get("Message", ""))
            if not_found is not None and not_found(code, message):
                raise JobNotFound(f"no {self.name} job {job_id!r} ({message}); cloudtrain list -p {self.name} "
                                  "shows the jobs") from None
            request_id = exc.response.get("ResponseMetadata", {}).get("RequestId")
            raise PlatformError(f"{what}: AWS refused: {code}: {message}; {hint_for(code)}",
                                request_id=request_id) from None
        except NoCredentialsError:
            aws_credentials(self.session())  # MissingCredentials: where boto3's chain looked
            raise PlatformError(f"{what}: this client has no credentials to sign with (the default chain "
                                "has some); give the client credentials") from None
        except (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError) as exc:
            raise PlatformError(f"{what}: cannot reach AWS ({exc}) after retries; check the network, the "
                                "region and AWS_ENDPOINT_URL") from None
        except BotoCoreError as exc:
            raise PlatformError(f"{what}: {exc}; check the AWS configuration") from None
