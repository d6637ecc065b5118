"""Opening a store while another process grows its map (issue 14, item 4).

A writer process grows the store past the default 64 MiB map while another process opens and closes it
200 times; every open must succeed. Before the fix the open's own write transaction (the one that opens
the tables) failed with ``MDB_MAP_RESIZED`` whenever the writer had grown the file since ``lmdb.open``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tractkv.store import LmdbStore

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tractkv.model import Blob
    from tractkv.store import LmdbStore

    path, ready, done = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    deadline = time.monotonic() + 60
    written = 0
    with LmdbStore(path, durable=False) as st:
        while time.monotonic() < deadline and written < 2000 and not done.exists():
            batch = st.new_batch()
            batch.put(Blob(data="g" * 200_000 + str(written)))  # ~200 KB: every commit extends the file
            st.apply(batch)
            written += 1
            if st.size_bytes() > 66 * 1024 * 1024:
                ready.touch()  # past the initial 64 MiB map: every open now races the growth
        print(written, st.map_size(), st.size_bytes())
    """
)

OPENER = textwrap.dedent(
    """
    import json, sys, time, traceback
    from pathlib import Path
    from tractkv.errors import TractError
    from tractkv.store import LmdbStore

    path, ready, done = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    opens, failures = 0, []
    deadline = time.monotonic() + 60
    while opens < 200 and time.monotonic() < deadline:
        try:
            with LmdbStore(path, durable=False, create=False) as st:
                st.format_version()
        except TractError as exc:
            failures.append(traceback.format_exc())
        opens += 1
    done.touch()
    print(json.dumps({"opens": opens, "failures": failures[:5], "failed": len(failures)}))
    """
)


def test_opens_succeed_while_another_process_grows_the_map(tmp_path: Path) -> None:
    path = tmp_path / "s"
    LmdbStore(path, durable=False).close()
    ready, done = tmp_path / "ready", tmp_path / "done"
    args = [str(path), str(ready), str(done)]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        opener = subprocess.run(
            [sys.executable, "-c", OPENER, *args], check=False, capture_output=True, text=True, timeout=120
        )
    finally:
        done.touch()
        out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert opener.returncode == 0, opener.stderr
    result = json.loads(opener.stdout)
    written, map_size, size = (int(x) for x in out.split())
    assert size > 64 * 1024 * 1024, (written, size)  # the store did grow past the initial map
    assert map_size > 64 * 1024 * 1024
    assert result["opens"] == 200
    assert result["failed"] == 0, result["failures"]
