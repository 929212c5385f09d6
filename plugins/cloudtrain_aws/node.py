"""In an AWS node, before ``cloudtrain launch``: ``python3 -m cloudtrain_aws.node [--sshd] -- COMMAND``.

1. ``CLOUDTRAIN_JOB_ID`` from SageMaker's ``TRAINING_JOB_NAME`` when not set;
2. the job's secrets from AWS Secrets Manager: ``$CLOUDTRAIN_SECRET_IDS`` is a JSON object
   ``{"NAME": "secret-id"}`` (``secret-id#key`` picks one key of a JSON secret), continued in
   ``$CLOUDTRAIN_SECRET_IDS_1``, ``_2``, ... (SageMaker takes values of at most 512 characters).  Each value is
   fetched with the image's boto3 (the node's role needs ``secretsmanager:GetSecretValue``; an ARN
   is read in its own region, a name in the node's default region) into a new file readable by
   this user only, whose path goes to ``CLOUDTRAIN_SECRETS_FILE``; ``cloudtrain launch`` exports
   the values to the job's command only.  No value is ever in the platform's request, in the
   node's environment as the platform sees it, or in a log;
3. with ``--sshd``: starts the image's OpenSSH server (mpi/horovod: ``mpirun`` on node 0 reaches
   the others over ssh), when there is one and this is root;
4. on SageMaker, what the AWS Deep Learning Containers' own entrypoint does before training,
   which ``ContainerEntrypoint`` replaces (``dlc_environment``);
5. execs COMMAND.

``python3 -m cloudtrain_aws.node copy SRC DEST``: the ec2 node script's ``storage.inputs`` and
``storage.output``.  ``copy s3://bucket/prefix DIR`` downloads the object the URI names, or every
object below it as a folder (paths below the prefix kept), into DIR; ``copy DIR s3://bucket/prefix``
uploads every file of DIR below the prefix.  Through the image's boto3, with the node's own
credentials (an EC2 instance profile: ``s3:ListBucket`` and ``s3:GetObject`` on the inputs,
``s3:PutObject`` on the output): a presigned URL, which fetches the code, cannot list a prefix or
name objects the job has not written yet, and dies with the submitter's session long before a
48-hour job ends.

Standard library only at import time (Python 3.8 grammar): it ships in the launcher bundle.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from cloudtrain.launch.exitcodes import EXIT_BAD_INPUT, EXIT_COMMAND_NOT_FOUND, EXIT_PLATFORM  # shipped in the bundle too


# What an AWS Deep Learning Container's ENTRYPOINT does before `train` (aws/deep-learning-containers,
# pytorch/training/docker/build_artifacts/start_with_right_hostname.sh and start_cuda_compat.sh):
# CUDA's forward-compatibility libraries first on LD_LIBRARY_PATH when the node's driver is older
# than they are, and gethostname() answering SageMaker's host name (algo-1, ...), preloaded from
# the image's changehostname.c, for MPI.  SageMaker runs ContainerEntrypoint instead of the
# image's ENTRYPOINT, so the prelude does both; an image without them is left as it is.
HOSTNAME_SOURCES = ("/changehostname.c", "/usr/local/bin/changehostname.c")
RESOURCE_CONFIG = "/opt/ml/input/config/resourceconfig.json"


def version_key(text):
    return tuple(int(p) for p in re.findall(r"\d+", text or ""))


def driver_version():
    """The NVIDIA kernel module's version, or "" without one."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+([0-9.]+)", f.read())
            return m.group(1) if m else ""
    except OSError:
        return ""


def cuda_compat_dir(cuda_home, driver):
    """``<cuda_home>/compat`` when its libcuda is newer than the node's ``driver`` (as the DLC's
    start_cuda_compat.sh decides: driver strictly older than the compat package's), else None."""
    link = os.path.join(cuda_home, "compat", "libcuda.so.1")
    if not driver or not os.path.islink(link):
        return None
    compat = os.readlink(link).split("libcuda.so.", 1)[-1]
    return os.path.dirname(link) if version_key(driver) < version_key(compat) else None


def hostname_preload(current_host, sources, workdir):
    """The DLC's libchangehostname.so built for ``current_host`` in ``workdir`` (its
    changehostname.c with PLACEHOLDER_HOSTNAME as the quoted name, as the DLC's sed makes it from
    jq's output), or None without the source or gcc."""
    source = next((s for s in sources if os.path.isfile(s)), None)
    gcc = shutil.which("gcc")
    if not (source and gcc and current_host):
        return None
    workdir = workdir or tempfile.mkdtemp(prefix="cloudtrain-hostname-")
    with open(source) as f:
        text = f.read().replace("PLACEHOLDER_HOSTNAME", json.dumps(current_host))
    c_file, obj, lib = (os.path.join(workdir, n) for n in ("changehostname.c", "changehostname.o",
                                                            "libchangehostname.so"))
    with open(c_file, "w") as f:
        f.write(text)
    subprocess.run([gcc, "-o", obj, "-c", "-fPIC", "-Wall", c_file], check=True, capture_output=True)
    subprocess.run([gcc, "-o", lib, "-shared", "-export-dynamic", obj, "-ldl"], check=True, capture_output=True)
    return lib


def current_host(environ, resource_config=RESOURCE_CONFIG):
    try:
        with open(resource_config) as f:
            return json.load(f).get("current_host") or ""
    except (OSError, ValueError):
        return environ.get("SM_CURRENT_HOST", "")


def dlc_environment(environ, cuda_home=None, sources=HOSTNAME_SOURCES, driver=None, workdir=None,
                    resource_config=RESOURCE_CONFIG):
    """The variables to change so the command runs as under a DLC's own entrypoint ({} for an
    image without its pieces)."""
    out = {}
    compat = cuda_compat_dir(cuda_home or environ.get("CUDA_HOME") or "/usr/local/cuda",
                             driver_version() if driver is None else driver)
    if compat:
        out["LD_LIBRARY_PATH"] = compat + (":" + environ["LD_LIBRARY_PATH"] if environ.get("LD_LIBRARY_PATH") else "")
    try:
        lib = hostname_preload(current_host(environ, resource_config), sources, workdir)
    except (OSError, subprocess.CalledProcessError) as exc:
        print("cloudtrain: warning: cannot build the image's changehostname.c (%s); gethostname() keeps the "
              "instance's name" % exc, file=sys.stderr)
        lib = None
    if lib:
        out["LD_PRELOAD"] = lib + (":" + environ["LD_PRELOAD"] if environ.get("LD_PRELOAD") else "")
    return out


def join_env_names(environ):
    """``CLOUDTRAIN_ENV_NAMES`` whole again: SageMaker takes values of at most 512 characters, so a
    long list of the job's variable names comes continued in ``CLOUDTRAIN_ENV_NAMES_1``, ``_2``, ..."""
    parts, n = [environ.get("CLOUDTRAIN_ENV_NAMES", "")], 1
    while environ.get("CLOUDTRAIN_ENV_NAMES_%d" % n):
        parts.append(environ.pop("CLOUDTRAIN_ENV_NAMES_%d" % n))
        n += 1
    if n > 1:
        environ["CLOUDTRAIN_ENV_NAMES"] = ",".join(p for p in parts if p)


def parse_ids(text):
    ids = json.loads(text or "{}")
    if not isinstance(ids, dict):
        raise ValueError("CLOUDTRAIN_SECRET_IDS must be a JSON object {NAME: secret-id}")
    return ids


def all_ids(environ):
    """``{NAME: secret-id}`` of ``CLOUDTRAIN_SECRET_IDS`` and its continuations ``_1``, ``_2``, ..."""
    ids = parse_ids(environ.get("CLOUDTRAIN_SECRET_IDS", ""))
    n = 1
    while environ.get("CLOUDTRAIN_SECRET_IDS_%d" % n):
        ids.update(parse_ids(environ["CLOUDTRAIN_SECRET_IDS_%d" % n]))
        n += 1
    return ids


def region_of(secret_id):
    parts = secret_id.split(":")
    if secret_id.startswith("arn:") and len(parts) > 3 and parts[3]:
        return parts[3]
    return None


def fetch(ids, client_for):
    """``{NAME: value}``; ``client_for(region)`` gives a Secrets Manager client."""
    values = {}
    for name, ref in sorted(ids.items()):
        secret_id, _, key = str(ref).partition("#")
        try:
            text = client_for(region_of(secret_id)).get_secret_value(SecretId=secret_id)["SecretString"]
        except Exception as exc:  # names the secret, never a value
            raise RuntimeError("%s (secret id %s): %s: %s" % (name, secret_id, exc.__class__.__name__, exc))
        if key:
            data = json.loads(text)
            if not isinstance(data, dict) or key not in data:
                raise KeyError("secret %s has no key %r" % (secret_id, key))
            text = data[key]
        values[name] = str(text)
    return values


def write(values, directory=None):
    fd, path = tempfile.mkstemp(prefix="cloudtrain-secrets-", suffix=".json", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 0600
        json.dump(values, f)
    return path


def secrets_file(environ):
    """Fetch the secrets named in ``$CLOUDTRAIN_SECRET_IDS``; returns the file's path."""
    ids = all_ids(environ)
    try:
        import boto3
    except ImportError:
        raise RuntimeError("the job's secrets are in AWS Secrets Manager but the image has no boto3; "
                           "install boto3 in the image")
    clients = {}

    def client_for(region):
        if region not in clients:
            clients[region] = boto3.client("secretsmanager", region_name=region) if region \
                else boto3.client("secretsmanager")
        return clients[region]

    try:
        values = fetch(ids, client_for)
    except Exception as exc:  # names the secret id, never a value
        raise RuntimeError("cannot read the job's secrets from AWS Secrets Manager: %s: %s; check the "
                           "secret ids and that the node's role may call secretsmanager:GetSecretValue"
                           % (exc.__class__.__name__, exc))
    return write(values, environ.get("CLOUDTRAIN_SECRETS_DIR") or None)


def split_s3(uri):
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``."""
    if not uri.startswith("s3://") or not uri[5:].split("/", 1)[0]:
        raise ValueError("%r is not an s3://bucket/prefix URI" % uri)
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def below(prefix, key):
    """``key``'s path below ``prefix`` (a folder; the object's own name when ``prefix`` names
    it), as a list of parts; None for a key outside it (``data/train2`` is not below ``data/train``)."""
    base = prefix.rstrip("/")
    if key.endswith("/"):
        return None  # a folder marker
    if key == base:
        rel = key.rsplit("/", 1)[-1]
    elif not base or key.startswith(base + "/"):
        rel = key[len(base):].lstrip("/")
    else:
        return None
    parts = rel.split("/")
    if not rel or ".." in parts or "" in parts:
        raise ValueError("s3 key %r would land outside the destination" % key)
    return parts


def copy_down(client, uri, dest):
    """Every object of ``uri`` (one object, or a folder) into the directory ``dest``; their number."""
    bucket, prefix = split_s3(uri)
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            parts = below(prefix, item["Key"])
            if parts is None:
                continue
            target = os.path.join(dest, *parts)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            client.download_file(bucket, item["Key"], target)
            count += 1
    if not count:
        raise ValueError("nothing is stored at %s" % uri)
    return count


def copy_up(client, source, uri):
    """Every file under the directory ``source`` to ``uri``/<its path>; their number."""
    bucket, prefix = split_s3(uri)
    count = 0
    for root, dirs, files in os.walk(source):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, source).replace(os.sep, "/")
            client.upload_file(path, bucket, "/".join(p for p in (prefix.strip("/"), rel) if p))
            count += 1
    return count


def copy(args):
    """``copy SRC DEST``: one side an s3:// URI, the other a local directory."""
    if len(args) != 2 or args[0].startswith("s3://") == args[1].startswith("s3://"):
        print("usage: python3 -m cloudtrain_aws.node copy s3://BUCKET/PREFIX DIR | DIR s3://BUCKET/PREFIX",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    source, dest = args
    try:
        import boto3
    except ImportError:
        print("cloudtrain: storage.inputs and storage.output are copied with boto3, which this node's Python "
              "does not have; install boto3 on the AMI or activate an environment that has it "
              "(providers.ec2.setup)", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        client = boto3.client("s3")
        if source.startswith("s3://"):
            count = copy_down(client, source, dest)
        else:
            count = copy_up(client, source, dest)
    except Exception as exc:  # botocore's errors name the bucket and the call, never a credential
        print("cloudtrain: cannot copy %s to %s: %s: %s; check the URI and that the instance profile may "
              "read it (s3:ListBucket, s3:GetObject) or write it (s3:PutObject)"
              % (source, dest, exc.__class__.__name__, exc), file=sys.stderr)
        return 3
    print("[cloudtrain] copied %d file(s) from %s to %s" % (count, source, dest))
    return 0


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["copy"]:
        return copy(args[1:])
    sshd = False
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--sshd":
            sshd = True
        else:
            print("usage: python3 -m cloudtrain_aws.node [--sshd] -- COMMAND ... | copy SRC DEST", file=sys.stderr)
            return EXIT_BAD_INPUT
    command = args[1:]
    if not command:
        print("cloudtrain_aws.node: no command after --", file=sys.stderr)
        return EXIT_BAD_INPUT
    env = os.environ
    if not env.get("CLOUDTRAIN_JOB_ID") and env.get("TRAINING_JOB_NAME"):
        env["CLOUDTRAIN_JOB_ID"] = env["TRAINING_JOB_NAME"]
    join_env_names(env)
    if env.get("TRAINING_JOB_NAME"):  # SageMaker: what the image's own entrypoint would have done
        env.update(dlc_environment(env))
    if env.get("CLOUDTRAIN_SECRET_IDS"):
        try:
            env["CLOUDTRAIN_SECRETS_FILE"] = secrets_file(env)
        except (RuntimeError, ValueError) as exc:
            print("cloudtrain: %s" % exc, file=sys.stderr)
            return EXIT_PLATFORM
    if sshd:
        from cloudtrain.launch.sshd import start_sshd  # the shipped launcher's, next to this module
        start_sshd()
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        print("cloudtrain: %s: command not found" % command[0], file=sys.stderr)
        return EXIT_COMMAND_NOT_FOUND


if __name__ == "__main__":
    sys.exit(main())
