"""The CLI as careful as git (issue 17, items 7, 8 and 11): errors that name CLI flags, git-like checkout and
reflog revisions, refusals instead of silence, a stored token budget, a clean log graph, and shell completion
of branch, remote and revision names. CliRunner for the commands, subprocesses for click's completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.store import fsck, open_store

REPO = Path(__file__).resolve().parent.parent


def run(store: str, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def ok(store: str, *args: str, input: str | None = None) -> str:
    code, out, err = run(store, *args, input=input)
    assert code == 0, err
    return out


def refused(store: str, *args: str) -> str:
    """Run a command that must fail: exit 1, one line `Error: ...` on stderr, the store unchanged."""
    before = snapshot(store)
    code, out, err = run(store, *args)
    assert code == 1, (out, err)
    assert err.startswith("Error: "), err
    assert err.count("\n") == 1, err
    assert snapshot(store) == before
    return err


def snapshot(store: str) -> tuple[dict[str, str], int, list[tuple[bytes, bytes]]]:
    with open_store(store, create=False) as s:
        report = fsck(s)
        assert report.ok, report.problems
        from tractkv.store import Table

        return dict(s.iter_refs()), s.count_objects(), list(s.table_iter(Table.META))


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    return path


def commit(store: str, text: str, *args: str) -> str:
    return ok(store, "commit", text, *args).strip()


# --- item 7: errors speak CLI -----------------------------------------------------------------------------


def test_branch_delete_of_unmerged_work_names_the_force_flag(store: str) -> None:
    commit(store, "hello")
    ok(store, "switch", "-c", "side")
    commit(store, "only on side")
    ok(store, "switch", "main")
    err = refused(store, "branch", "--delete", "side")
    assert "--force" in err
    assert "pass force" not in err
    ok(store, "branch", "--delete", "side", "--force")


def test_merge_conflict_names_the_branches_the_texts_and_the_strategy_flag(store: str) -> None:
    first = commit(store, "What is the capital of France? Answer in a single word, please, and nothing else.")
    ok(store, "branch", "side")
    commit(store, "What is the capital of Germany?", "--edit", first)
    ok(store, "switch", "side")
    commit(store, "What is the capital of Spain?", "--edit", first)
    ok(store, "switch", "main")
    err = refused(store, "merge", "side")
    assert "merging side into main" in err
    assert 'main: "What is the capital of Germany?"' in err
    assert 'side: "What is the capital of Spain?"' in err
    assert "--strategy ours|theirs" in err
    assert f"message {first[:12]}" in err
    with open_store(store, create=False) as s:  # no content hash names a side any more
        blobs = [oid for oid in s.iter_oids() if s.get(oid).KIND == "blob"]
    assert not any(b[:12] in err for b in blobs)
    out = ok(store, "merge", "side", "--strategy", "theirs")
    assert out.startswith("merge: ")
    assert "1 conflict(s) resolved (theirs)" in out
    messages = json.loads(ok(store, "compile", "--format", "openai"))["messages"]
    assert messages[0]["content"] == "What is the capital of Spain?"


def test_a_priority_conflict_names_the_priorities(store: str) -> None:
    first = commit(store, "remember me")
    ok(store, "branch", "side")
    ok(store, "annotate", first, "skip")
    ok(store, "switch", "side")
    ok(store, "annotate", first, "pinned")
    ok(store, "switch", "main")
    err = refused(store, "merge", "side")
    assert "priority changed on both sides (main: skip; side: pinned)" in err


def test_remote_remove_of_an_unknown_remote_lists_the_remotes(store: str, tmp_path: Path) -> None:
    commit(store, "hi")
    err = refused(store, "remote", "remove", "nosuch")
    assert "remote add" not in err
    assert "there are no remotes" in err
    ok(store, "remote", "add", "origin", str(tmp_path / "elsewhere"))
    ok(store, "remote", "add", "backup", str(tmp_path / "backup"))
    err = refused(store, "remote", "remove", "nosuch")
    assert "remote add" not in err
    assert "the remotes are: backup, origin" in err


# --- item 8: like git, never silent -----------------------------------------------------------------------


def test_checkout_of_a_branch_name_switches_to_it(store: str) -> None:
    commit(store, "one")
    tip = commit(store, "two")
    ok(store, "branch", "side")
    detached = ok(store, "checkout", "HEAD~1").strip()  # a revision that is not a branch still detaches
    assert "HEAD detached at" in ok(store, "status")
    assert detached != tip
    code, out, err = run(store, "checkout", "main")
    assert code == 0, err
    assert out.strip() == tip
    assert "on branch main" in err
    assert ok(store, "status").startswith("on branch main")
    commit(store, "three")  # on a branch again: commits are allowed
    ok(store, "checkout", "side")
    assert ok(store, "status").startswith("on branch side")


def test_reflog_revisions_resolve_everywhere(store: str) -> None:
    a = commit(store, "a")
    b = commit(store, "b")
    c = commit(store, "c")
    assert ok(store, "show", "main@{0}", "--json").count(c) >= 1
    assert json.loads(ok(store, "show", "main@{1}", "--json"))["commit_id"] == b
    assert json.loads(ok(store, "show", "HEAD@{2}", "--json"))["commit_id"] == a
    assert json.loads(ok(store, "show", "@{1}~1", "--json"))["commit_id"] == a
    assert [i["commit_id"] for i in json.loads(ok(store, "log", "main@{1}", "--json"))] == [b, a]
    assert json.loads(ok(store, "compile", "--at", "main@{2}"))["head"] == a
    ok(store, "reset", "HEAD~2")
    ok(store, "reset", "main@{1}")  # undo the reset: the tip before the last move
    assert json.loads(ok(store, "show", "--json"))["commit_id"] == c
    assert "the reflog of refs/heads/main has 5 entries" in refused(store, "show", "main@{5}")
    ok(store, "checkout", a)
    assert "HEAD is detached" in refused(store, "show", "HEAD@{1}")
    with Tract.open(store) as t:  # the library resolves them too
        assert t.get_commit("main@{3}").commit_id == b


def test_reflog_of_an_unknown_branch_is_an_error(store: str) -> None:
    commit(store, "a")
    assert "no branch named 'nosuch'" in refused(store, "reflog", "nosuch")
    ok(store, "branch", "gone")
    ok(store, "branch", "--delete", "gone")
    assert "deleted branch gone" in ok(store, "reflog", "gone")  # a deleted branch keeps its reflog


def test_reflog_head_is_the_current_branchs_and_a_clear_error_when_detached(store: str) -> None:
    a = commit(store, "a")
    commit(store, "b")
    assert ok(store, "reflog", "HEAD") == ok(store, "reflog")
    assert json.loads(ok(store, "reflog", "HEAD", "--json")) == json.loads(ok(store, "reflog", "--json"))
    ok(store, "switch", "-c", "side")
    commit(store, "on side")
    side = ok(store, "reflog", "HEAD")
    assert side == ok(store, "reflog", "side") != ok(store, "reflog", "main")
    ok(store, "checkout", a)
    code, out, err = run(store, "reflog", "HEAD")
    assert code != 0
    assert out == ""
    detached = f"HEAD is detached at {a[:12]} (read-only); switch to a branch first"
    assert err == f"Error: cannot show the reflog of HEAD: {detached}\n"


def test_log_refuses_an_unknown_operation(store: str) -> None:
    commit(store, "a")
    err = refused(store, "log", "--op", "bogus")
    assert "unknown operation 'bogus'" in err
    assert "annotate, append, compress, edit, merge" in err
    assert ok(store, "log", "--op", "edit") == ""


def test_compile_json_keeps_the_provider_format(store: str) -> None:
    commit(store, "Be brief.", "--role", "system")
    commit(store, "hello")
    for fmt in ("openai", "anthropic"):
        plain = json.loads(ok(store, "compile", "--format", fmt))
        assert json.loads(ok(store, "compile", "--format", fmt, "--json")) == plain
    assert "system" in json.loads(ok(store, "compile", "--format", "anthropic", "--json"))
    assert json.loads(ok(store, "compile", "--format", "text", "--json"))["messages"][1]["content"] == "hello"


def test_a_stored_token_budget_is_reported_by_status(store: str, tmp_path: Path) -> None:
    commit(store, "hello there, how are you today?")
    assert ok(store, "budget") == "no token budget on main\n"
    assert ok(store, "budget", "200") == "200 tokens on main (warn)\n"
    assert json.loads(ok(store, "budget", "--json")) == {
        "branch": "main",
        "budget": 200,
        "action": "warn",
        "threshold": 1.0,
    }
    status = json.loads(ok(store, "status", "--json"))
    assert status["token_budget"] == 200
    assert status["budget_used"] == status["token_count"] / 200
    assert "-token budget" in ok(store, "status")
    assert "200-token budget" in ok(store, "status")
    ok(store, "switch", "-c", "other")  # per branch
    assert json.loads(ok(store, "status", "--json"))["token_budget"] is None
    ok(store, "switch", "main")
    ok(store, "budget", "200", "--action", "reject")
    # one budget: the deprecated open() argument stores it, as set_budget does (keeping action and threshold)
    with pytest.warns(DeprecationWarning, match="calls set_budget"):
        opened = Tract.open(store, token_budget=50)
    with opened as t:
        assert t.status().token_budget == 50
        assert t.budget() == 50
    with Tract.open(store) as t:
        assert (t.status().token_budget, t.status().budget_action) == (50, "reject")
        assert t.set_budget(300) == 300
    clone = tmp_path / "clone.tkv"  # a local setting: never synced
    ok(str(tmp_path), "clone", store, str(clone))
    assert json.loads(ok(str(clone), "status", "--json"))["token_budget"] is None
    assert "no token budget" in ok(str(clone), "budget")
    assert run(store, "budget", "0")[0] == 2  # click refuses it: not a positive number
    assert "not both" in run(store, "budget", "5", "--clear")[2]
    ok(store, "budget", "--clear")
    assert json.loads(ok(store, "status", "--json"))["token_budget"] is None
    ok(store, "budget", "10")
    ok(store, "switch", "other")
    ok(store, "branch", "--delete", "main", "--force")  # a deleted branch keeps no setting
    with open_store(store, create=False) as s:
        from tractkv.store import Table

        assert not [k for k, _ in s.table_iter(Table.META, b"budget:")]
    ok(store, "checkout", "HEAD")
    assert "cannot set a budget: HEAD is detached" in refused(store, "budget", "10")


# --- item 11: the log graph, completion ------------------------------------------------------------------


def test_log_graph_merge_lines_say_merge_once_and_a_limit_ends_cleanly(store: str, tmp_path: Path) -> None:
    commit(store, "hi")
    clone = str(tmp_path / "clone.tkv")
    ok(str(tmp_path), "clone", store, clone)
    commit(store, "from the origin")
    commit(clone, "from the clone")
    assert ok(clone, "pull").startswith("merge ")
    lines = ok(clone, "log", "--graph").splitlines()
    assert lines[0].endswith("merge: origin/main (auto)")
    assert lines[0].count("merge") == 1
    assert lines[1] == "|\\"
    for limit in range(1, 5):
        drawn = ok(clone, "log", "--graph", "--limit", str(limit)).splitlines()
        assert sum("*" in line for line in drawn) == limit
        assert "*" in drawn[-1], drawn  # the drawing ends with a commit, no edge into nothing
    assert ok(clone, "log", "--graph", "--limit", "1") == lines[0] + "\n"


def complete(
    store: str, *words: str, cwd: Path | None = None
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """What click's bash completion offers for the last of ``words`` (a real `tractkv` process)."""
    line = ["tractkv", "--store", store, *words]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "_TRACTKV_COMPLETE": "bash_complete",
        "COMP_WORDS": " ".join(line),
        "COMP_CWORD": str(len(line) - 1),
    }
    out = subprocess.run(
        [sys.executable, "-m", "tractkv"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        cwd=cwd,
    )
    return [item.split(",", 1)[1] for item in out.stdout.splitlines() if item], out


def test_shell_completion_offers_branch_remote_and_revision_names(store: str, tmp_path: Path) -> None:
    commit(store, "hi")
    ok(store, "branch", "feature/a")
    ok(store, "branch", "fix")
    ok(store, "remote", "add", "origin", str(tmp_path / "o.tkv"))
    ok(str(tmp_path / "o.tkv"), "init")
    ok(store, "push", "origin", "fix")
    before = snapshot(store)
    assert complete(store, "switch", "f")[0] == ["feature/a", "fix"]
    assert complete(store, "reflog", "")[0] == ["feature/a", "fix", "main"]
    assert complete(store, "log", "")[0] == ["HEAD", "feature/a", "fix", "main", "origin/fix"]
    assert complete(store, "merge", "orig")[0] == ["origin/fix"]
    assert complete(store, "compile", "--at", "ma")[0] == ["main"]
    assert complete(store, "push", "")[0] == ["origin"]
    assert complete(store, "push", "origin", "fi")[0] == ["fix"]
    assert complete(store, "remote", "remove", "o")[0] == ["origin"]
    assert snapshot(store) == before


def test_shell_completion_reads_the_store_named_after_the_command_or_under_dash_c(
    store: str, tmp_path: Path
) -> None:
    """`--store` and `-C` may come after the command (issue 34, item 5): completion reads the store they name."""
    commit(store, "hi")
    ok(store, "branch", "fix")
    missing = str(tmp_path / "typo")
    assert complete(missing, "switch", "--store", store, "f")[0] == ["fix"]
    where, name = os.path.split(store)
    assert complete(missing, "switch", "-C", where, "--store", name, "f")[0] == ["fix"]
    assert complete(name, "-C", where, "switch", "f", cwd=tmp_path.parent)[0] == ["fix"]
    assert not os.path.exists(missing)


def test_shell_completion_never_writes_or_fails_loudly(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    names, out = complete(str(missing), "switch", "")
    assert (names, out.returncode, out.stderr) == ([], 0, "")
    assert not missing.exists()  # completion never creates a store
    damaged = tmp_path / "damaged.tkv"
    ok(str(damaged), "init")
    (damaged / "data.mdb").write_bytes(b"not an lmdb file" * 10)
    names, out = complete(str(damaged), "log", "")
    assert (names, out.returncode, out.stderr) == ([], 0, "")
    assert (damaged / "data.mdb").read_bytes() == b"not an lmdb file" * 10
    default = tmp_path / "cwd"  # no --store: $TRACTKV_STORE or ./.tractkv, as for commands
    default.mkdir()
    ok(str(default / ".tractkv"), "init")
    ok(str(default / ".tractkv"), "commit", "hi")
    line = ["tractkv", "switch", ""]
    env = {
        **{k: v for k, v in os.environ.items() if k != "TRACTKV_STORE"},
        "PYTHONPATH": str(REPO),
        "_TRACTKV_COMPLETE": "bash_complete",
        "COMP_WORDS": " ".join(line),
        "COMP_CWORD": "2",
    }
    out = subprocess.run(
        [sys.executable, "-m", "tractkv"],
        capture_output=True,
        text=True,
        env=env,
        cwd=default,
        timeout=60,
        check=False,
    )
    assert out.stdout.splitlines() == ["plain,main"], out.stderr


def test_bash_completion_script_is_documented_and_works() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "_TRACTKV_COMPLETE=bash_source tractkv" in readme
    env = {**os.environ, "PYTHONPATH": str(REPO), "_TRACTKV_COMPLETE": "bash_source"}
    out = subprocess.run(
        [sys.executable, "-m", "tractkv"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert out.returncode == 0
    assert "complete -o nosort -F _tractkv_completion tractkv" in out.stdout
