"""In an AWS node, before ``cloudtrain launch``: ``python3 -m cloudtrain_aws.node [--sshd] -- COMMAND``.

1. ``CLOUDTRAIN_JOB_ID`` from SageMaker's ``TRAINING_JOB_NAME`` when not set;
2. the job's secrets from AWS Secrets Manager: ``$CLOUDTRAIN_SECRET_IDS`` is a JSON object
   ``{"NAME": "secret-id"}`` (``secret-id#key`` picks one key of a JSON secret).  Each value is
   fetched with the image's boto3 (the node's role needs ``secretsmanager:GetSecretValue``; an ARN
   is read in its own region, a name in the node's default region) into a new file readable by
   this user only, whose path goes to ``CLOUDTRAIN_SECRETS_FILE``; ``cloudtrain launch`` exports
   the values to the job's command only.  No value is ever in the platform's request, in the
   node's environment as the platform sees it, or in a log;
3. with ``--sshd``: starts the image's OpenSSH server (mpi/horovod: ``mpirun`` on node 0 reaches
   the others over ssh), when there is one and this is root;
4. execs COMMAND.

Standard library only at import time (Python 3.8 grammar): it ships in the launcher bundle.
"""
import json
import os
import subprocess
import sys
import tempfile

from cloudtrain.exitcodes import EXIT_BAD_INPUT, EXIT_COMMAND_NOT_FOUND, EXIT_PLATFORM  # shipped in the bundle too


def parse_ids(text):
    ids = json.loads(text or "{}")
    if not isinstance(ids, dict):
        raise ValueError("CLOUDTRAIN_SECRET_IDS must be a JSON object {NAME: secret-id}")
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
    ids = parse_ids(environ.get("CLOUDTRAIN_SECRET_IDS", ""))
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


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    sshd = False
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--sshd":
            sshd = True
        else:
            print("usage: python3 -m cloudtrain_aws.node [--sshd] -- COMMAND ...", file=sys.stderr)
            return EXIT_BAD_INPUT
    command = args[1:]
    if not command:
        print("cloudtrain_aws.node: no command after --", file=sys.stderr)
        return EXIT_BAD_INPUT
    env = os.environ
    if not env.get("CLOUDTRAIN_JOB_ID") and env.get("TRAINING_JOB_NAME"):
        env["CLOUDTRAIN_JOB_ID"] = env["TRAINING_JOB_NAME"]
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
