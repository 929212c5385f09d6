#!/bin/sh
# cloudtrain: the script of each of the @nodes@ node(s) of job <job-id> (@name@), sent by SSM SendCommand; runs as root
set -eu
JOB='<job-id>'
# however this script ends (a failed step, the launcher's end, HUP/INT/TERM), node_end ends it: names the
# step that failed, stops the checkpoint sync, schedules the shutdown (terminate_when_done).  Not when
# SSM stops it (executionTimeout = max_runtime, CancelCommand): the agent SIGKILLs the process group
# (amazon-ssm-agent agent/executers/executers_unix.go killProcess), no trap runs; the backstop below
# (terminate_when_done) then shuts the instance down a grace period after max_runtime.
# shellcheck disable=SC2317  # reached: the EXIT trap below calls it
node_end() {
  code=$1
  set +e
  [ -z "${SYNC:-}" ] || ckpt_stop
  [ "$code" -eq 0 ] || echo "[cloudtrain] node ${NODE:-?} failed while $STEP (exit $code)" >&2
#@ shutdown
  exit "$code"
}
trap 'node_end $?' EXIT
trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM
#@ backstop
STEP='finding its rank'
# this node's rank: its instance id's place in the job's instances (node 0 first)
NODE=$(echo '<instance-ids>' | tr , '\n' | grep -nxF "${AWS_SSM_INSTANCE_ID:-none}" | cut -d: -f1)
if [ -z "$NODE" ]; then
  echo "[cloudtrain] instance ${AWS_SSM_INSTANCE_ID:-?} is not one of the nodes of $JOB" >&2; exit 2
fi
NODE=$((NODE - 1))
STEP='preparing its work dir and /etc/hosts'
WORK=@workdir@/"$JOB"
mkdir -p "$WORK/output" && cd "$WORK"
# host names of the job's nodes (node 0 first)
if ! grep -qs "cloudtrain $JOB" /etc/hosts; then
cat >>/etc/hosts <<'CLOUDTRAIN_HOSTS'
<hosts-lines>
CLOUDTRAIN_HOSTS
fi
# the job's code with the launcher, from S3 (a presigned URL: the node needs no S3 permission)
STEP='fetching the code'
if [ ! -d code/.cloudtrain ]; then
  @python@ -c @fetch@ '<presigned-code-url>' code.tar.gz
  STEP='checking and unpacking the code'
  rm -rf code.part && mkdir code.part
#@ unpack
  rm -f code.tar.gz
  rm -rf code && mv code.part code
fi
#@ shm
#@ ssh
#@ setup
# the job's environment
#@ env
export CLOUDTRAIN_NODE_RANK="$NODE"
export CLOUDTRAIN_OUTPUT_DIR="$WORK/output"
#@ inputs
#@ checkpoint
#@ efa
cd "$WORK/code"
STEP='running cloudtrain launch'
set +e
#@ launch
code=$?
echo "[cloudtrain] node $NODE exited with code $code"
#@ checkpoint-end
#@ output
exit "$code"  # through node_end
