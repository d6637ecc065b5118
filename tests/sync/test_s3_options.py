"""s3:// remotes as plain boto3 would set them up (issue 17, item 14), against the real SeaweedFS the S3 tests start:
the region is boto3's (profile, AWS_REGION / AWS_DEFAULT_REGION; us-east-1 only when it resolves none), the
addressing style is boto3's unless the URL names one (``?addressing=path|virtual|auto``), and an endpoint that
ignores conditional writes can still be fetched from and cloned: only pushes are refused, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.errors import UnsupportedURL
from tractkv.sync.s3 import S3Remote

from .test_cli_sync import messages, tkv

pytestmark = pytest.mark.slow
MAIN = "refs/heads/main"

# The CLI in a process whose S3 client drops If-None-Match / If-Match from every PUT before it is signed and
# sent: to the real server these are plain writes, as an S3-compatible server that ignores the conditions
# would take them.
IGNORING_CONDITIONS = """
import sys
import boto3.session

_client = boto3.session.Session.client


def client(self, *args, **kwargs):
    made = _client(self, *args, **kwargs)

    def strip(params, **_):
        params.pop("IfNoneMatch", None)
        params.pop("IfMatch", None)

    made.meta.events.register("provide-client-params.s3.PutObject", strip)
    return made


boto3.session.Session.client = client
from tractkv.cli import main

sys.argv[0] = "tractkv"
main()
"""


def tkv_ignoring_conditions(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", IGNORING_CONDITIONS, "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def bucket_head(url: str) -> str | None:
    with S3Remote(url) as remote:
        return remote.list_refs().get(MAIN)


def test_an_endpoint_ignoring_conditions_can_be_cloned_and_fetched_but_not_pushed_to(
    s3_url: str, tmp_path: Path
) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    tkv(a, "init")
    tkv(a, "commit", "--role", "system", "fleet agent")
    tkv(a, "commit", "in the bucket")
    tkv(a, "remote", "add", "origin", s3_url)
    tkv(a, "push", "-q")
    pushed = bucket_head(s3_url)
    assert pushed is not None

    out = tkv_ignoring_conditions(tmp_path, "clone", s3_url, str(b))
    assert out.returncode == 0, out.stderr
    assert messages(b) == messages(a)
    out = tkv_ignoring_conditions(b, "fetch")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "up to date\n"

    tkv(c, "init")
    out = tkv_ignoring_conditions(c, "remote", "add", "origin", s3_url)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines()[1].startswith("warning: ")
    assert out.stderr.splitlines()[1].endswith("fetch and clone work, push will be refused")
    assert tkv(c, "remote", "list").stdout == f"origin\t{s3_url}\n"
    assert tkv_ignoring_conditions(c, "pull").returncode == 0
    assert messages(c) == messages(a)

    tkv(b, "commit", "from b")
    out = tkv_ignoring_conditions(b, "push")
    assert out.returncode == 1
    (line,) = out.stderr.splitlines()
    assert line.startswith(
        f"Error: cannot push: {s3_url} accepted a write whose IfNoneMatch condition was false"
    )
    assert line.endswith("(fetch and clone read without conditions, so they still work)")
    assert bucket_head(s3_url) == pushed  # nothing moved
    tkv(b, "push", "-q")  # the same bucket through a client that sends the conditions
    assert bucket_head(s3_url) != pushed


@pytest.fixture
def no_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An AWS config file of our own and no region in the environment; returns the config file."""
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "aws-config"
    config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    return config


def region_of(url: str) -> str:
    with S3Remote(url) as remote:
        return str(remote._s3.meta.region_name)


def test_the_region_is_boto3s_and_us_east_1_only_when_it_resolves_none(
    s3_url: str, no_region: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert region_of(s3_url) == "us-east-1"  # boto3 resolves none: the fallback
    no_region.write_text("[default]\nregion = eu-west-3\n[profile other]\nregion = ap-south-1\n")
    assert region_of(s3_url) == "eu-west-3"  # the profile's, as plain boto3 (it was us-east-1)
    monkeypatch.setenv("AWS_PROFILE", "other")
    assert region_of(s3_url) == "ap-south-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ca-central-1")
    assert region_of(s3_url) == "ca-central-1"
    # and the CLI reaches the real server that way (a process with only the config file's region)
    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "signed for ap-south-1")
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_DEFAULT_REGION", "AWS_REGION")}
    for args in (("remote", "add", "origin", s3_url), ("push", "-q")):
        out = subprocess.run(
            [sys.executable, "-m", "tractkv", "--store", str(a), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        assert out.returncode == 0, out.stderr
    assert bucket_head(s3_url) is not None


def test_the_addressing_style_is_boto3s_unless_the_url_names_one(
    s3_endpoint: str, s3_url: str, tmp_path: Path
) -> None:
    port = s3_endpoint.rsplit(":", 1)[1]
    localhost = {"AWS_ENDPOINT_URL": f"http://localhost:{port}"}
    bucket = s3_url.split("/")[2]
    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "addressed")
    # boto3's default for a custom endpoint (path-style here), and path named explicitly: both reach the server
    tkv(a, "remote", "add", "default", s3_url, env=localhost)
    tkv(a, "push", "-q", "default", env=localhost)
    tkv(a, "remote", "add", "path", f"{s3_url}-p?addressing=path", env=localhost)
    tkv(a, "push", "-q", "path", env=localhost)
    tkv(tmp_path, "clone", f"{s3_url}-p?addressing=path", str(tmp_path / "b"), env=localhost)
    assert messages(tmp_path / "b") == ["addressed"]
    # virtual-hosted puts the bucket in the host name, which this server (no domain configured) is not at
    with S3Remote(f"{s3_url}?addressing=virtual") as remote:
        assert remote._s3.meta.config.s3 == {"addressing_style": "virtual"}
    out = tkv(a, "remote", "add", "virtual", f"{s3_url}-v?addressing=virtual", env=localhost, ok=False)
    assert out.returncode == 1
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"Error: S3 probe write failed on {s3_url}-v?addressing=virtual")
    assert f"{bucket}.localhost" in line
    out = tkv(a, "remote", "add", "bad", f"{s3_url}?addressing=sideways", ok=False)
    assert out.stderr.splitlines() == [
        f"Error: cannot use remote URL '{s3_url}?addressing=sideways': addressing= takes one of auto, path, virtual"
    ]
    with pytest.raises(UnsupportedURL, match="unknown parameter 'region'"):
        S3Remote(f"{s3_url}?region=x")
    with Tract.open(str(a), create=False) as t:
        assert set(t.remotes()) == {"default", "path"}
