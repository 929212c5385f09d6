"""homedir: the store's companion files are narrowed, never made, and may vanish meanwhile."""
import os

from cloudtrain.input.homedir import narrow_if_present


def test_a_missing_companion_file_is_neither_an_error_nor_created(tmp_path):
    # SQLite removes state.db-shm when the last connection closes, in whatever process: a
    # check-then-chmod of it raced (FileNotFoundError in a fresh-clone run); and making it
    # ourselves would leave a file SQLite did not write.
    shm = tmp_path / "state.db-shm"
    narrow_if_present(shm)
    assert not shm.exists()


def test_a_wider_companion_file_is_narrowed(tmp_path):
    wal = tmp_path / "state.db-wal"
    wal.write_bytes(b"")
    os.chmod(wal, 0o644)
    narrow_if_present(wal)
    assert wal.stat().st_mode & 0o777 == 0o600
