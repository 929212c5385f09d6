"""The request kept for the dashboard at submit time: the rendered envelope (secrets never in
clear), private (0600 in a 0700 folder), read back only for its own handle."""
import json
import stat

from conftest import run_cli, write_job

SECRET = "s3cr3t-value-never-kept"


def test_the_kept_request_is_the_render_with_secrets_masked_and_private(tmp_path, home):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('ok')\n")
    job = write_job(tmp_path, """
        name: kept
        code: code
        command: python train.py
        distribution: {type: none, nodes: 1}
        secrets: {API_TOKEN: {from_env: CT_TEST_TOKEN}}
    """)
    proc = run_cli("submit", "-p", "local", job, env={"CT_TEST_TOKEN": SECRET}, check=0)
    handle = next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("submitted "))
    folder = home / "requests"
    files = list(folder.iterdir())
    assert len(files) == 1
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert SECRET not in files[0].read_text()

    from cloudtrain.runtime import requestlog
    kept = requestlog.read(handle)
    assert kept["handle"] == handle and kept["provider"] == "local"
    assert kept["artifacts"][0]["kind"] == "local/process"
    rendered = json.loads(run_cli("render", "-p", "local", job, "-o", "json", check=0).stdout)
    assert [a["kind"] for a in kept["artifacts"]] == [a["kind"] for a in rendered["artifacts"]]
    assert requestlog.read("local://someone-else") is None
