"""The ARGUS trace store opens its databases safely: any folder name, read-only never creates."""

import pytest

from causalkit.systems.tracing import TraceStore
from causalkit.systems.tracing.events import TraceFileError


@pytest.mark.parametrize("name", ["run#1", "run?x", "run%20y", "plain"])
def test_store_reads_back_under_any_folder_name(tmp_path, name):
    store = TraceStore(tmp_path / name)
    writer = store.writer(0)
    writer.set_meta({"world_size": 1})
    writer.close()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert store.meta() == {0: {"world_size": 1}}
    assert store.iterations().empty
    after = sorted(p.name for p in tmp_path.rglob("*") if not p.name.endswith(("-shm", "-wal")))
    assert after == before  # nothing created by the read-only opens


def test_read_only_open_of_a_vanished_file_creates_nothing(tmp_path, monkeypatch):
    store = TraceStore(tmp_path / "run#2")
    store.writer(0).close()
    listed = store.files()
    listed[0].unlink()                          # removed between listing and opening
    monkeypatch.setattr(store, "files", lambda: listed)
    with pytest.raises(TraceFileError, match="corrupt or truncated"):
        store.meta()
    assert not listed[0].exists() and not (tmp_path / "run").exists()
