"""Folders named for their owner, and the sweep of those whose owner is gone."""

import os
import re
import subprocess

from prover_assets.records.owned import HOST, owned_name, owner_is_gone, remove_dead_owners


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def folder_of(parent, prefix, pid, host=HOST, size=0, tag="0a1b"):
    folder = parent / f"{prefix}-h{host}-p{pid}-{tag}"
    folder.mkdir()
    (folder / "file").write_bytes(b"x" * size)
    return folder


def test_an_owned_name_says_this_host_and_this_process():
    name = owned_name("lean-repl")
    assert re.fullmatch(rf"lean-repl-h{HOST}-p{os.getpid()}-[0-9a-f]{{8}}", name)
    assert not owner_is_gone(name)


def test_a_dead_owners_folder_is_removed_and_said_with_its_size(tmp_path):
    gone = folder_of(tmp_path, "lean-repl", dead_pid(), size=3 << 20)
    removed = remove_dead_owners(tmp_path, "lean-repl")
    assert [(r.path, r.size_bytes) for r in removed] == [(gone, 3 << 20)]
    assert removed[0].describe() == f"{gone} (3.0 MiB)"
    assert not gone.exists()


def test_a_live_owners_another_hosts_a_kept_and_an_unowned_folder_stay(tmp_path):
    live = folder_of(tmp_path, "lean-repl", os.getpid())
    other_host = folder_of(
        tmp_path, "lean-repl", dead_pid(), host="0" * 8 if HOST != "0" * 8 else "1" * 8
    )
    kept = folder_of(tmp_path, "lean-repl", dead_pid())
    unowned = tmp_path / "lean-repl-abc"
    unowned.mkdir()
    other_prefix = folder_of(tmp_path, "work", dead_pid())
    assert remove_dead_owners(tmp_path, "lean-repl", keep=lambda path: path == kept) == []
    assert all(p.exists() for p in (live, other_host, kept, unowned, other_prefix))


def test_a_folder_its_owner_is_done_with_is_removed_though_the_owner_lives(tmp_path):
    done = folder_of(tmp_path, "work", os.getpid())
    (done / "done").write_text("")
    running = folder_of(tmp_path, "work", os.getpid(), tag="0c0d")
    removed = remove_dead_owners(tmp_path, "work", finished=lambda path: (path / "done").exists())
    assert [r.path for r in removed] == [done]
    assert running.exists()


def test_a_sweep_goes_on_past_the_folders_it_leaves_and_logs_each_removal(tmp_path, caplog):
    import logging

    dead = dead_pid()
    unowned = tmp_path / "lean-repl-abc"  # sorts first
    unowned.mkdir()
    kept = folder_of(tmp_path, "lean-repl", dead, tag="0000")
    gone = folder_of(tmp_path, "lean-repl", dead, tag="ffff", size=10)
    with caplog.at_level(logging.WARNING, logger="prover_assets.records.owned"):
        removed = remove_dead_owners(tmp_path, "lean-repl", keep=lambda path: path == kept)
    assert [r.path for r in removed] == [gone]
    assert caplog.messages == [f"removed {gone} (10 bytes), left by a process that is gone"]


def test_a_size_is_every_files_bytes_under_a_folder_and_a_files_own(tmp_path):
    from prover_assets.records.owned import size_bytes

    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "a").write_bytes(b"x" * 3)
    (folder / "sub" / "b").write_bytes(b"x" * 5)
    assert size_bytes(folder) == 8
    assert size_bytes(folder / "a") == 3
    assert size_bytes(tmp_path / "missing") == 0


def test_a_sweep_goes_on_past_a_live_owners_folder(tmp_path):
    running = folder_of(tmp_path, "work", os.getpid(), tag="0000")  # sorts first
    done = folder_of(tmp_path, "work", os.getpid(), tag="ffff")
    (done / "done").write_text("")
    removed = remove_dead_owners(tmp_path, "work", finished=lambda path: (path / "done").exists())
    assert [r.path for r in removed] == [done] and running.exists()
